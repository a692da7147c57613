"""Move each decision fact that only the approvals sign-off held (printed name, meaning, time of the
decision, how the signer re-authenticated, its public code) onto the deployments sign-off, and
carry a void that only one side recorded over to it, so no live decision is lost or revived."""

import uuid

from django.db import migrations


def facts_to_signoff(apps, schema_editor):  # type: ignore[no-untyped-def]
    PacketSignature = apps.get_model("approvals", "PacketSignature")
    SignOff = apps.get_model("deployments", "SignOff")
    for signature in PacketSignature.objects.order_by("id").iterator():
        signoff = SignOff.objects.get(pk=signature.signoff_id)
        signoff.signer_name = signature.signer_name
        signoff.meaning = signature.meaning
        signoff.signed_at = signature.signed_at
        signoff.auth_method = signature.auth_method
        signoff.comment = signoff.comment or signature.comment
        if signoff.voided_at is None and signature.voided_at is not None:
            signoff.voided_at, signoff.void_reason = signature.voided_at, signature.void_reason
        # The API named a sign-off by the approvals row's code: the decision keeps that name.
        signoff.code, signature.code = signature.code, uuid.uuid4()
        signature.save(update_fields=["code"])
        signoff.save(
            update_fields=[
                "signer_name",
                "meaning",
                "signed_at",
                "auth_method",
                "comment",
                "voided_at",
                "void_reason",
                "code",
            ]
        )


class Migration(migrations.Migration):
    dependencies = [
        ("approvals", "0004_packetsignature"),
    ]

    operations = [migrations.RunPython(facts_to_signoff, migrations.RunPython.noop)]
