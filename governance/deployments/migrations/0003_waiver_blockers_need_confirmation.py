"""Waivers granted before two reviewers were required: a waiver of a blocker found in its request's
evidence is no longer in force until it is proposed again with the licensor's written permission
and confirmed by a second legal reviewer (issue 13)."""

from django.db import migrations


def mark_blocker_waivers(apps, schema_editor):  # type: ignore[no-untyped-def]
    Waiver = apps.get_model("deployments", "Waiver")
    for waiver in Waiver.objects.select_related("request").filter(needs_confirmation=False):
        findings = [
            finding
            for evaluation in (waiver.request.evidence or {}).get("licenses", [])
            if evaluation["license"] == waiver.license_key
            for finding in evaluation["findings"]
            if finding["code"] == waiver.finding_code and waiver.clause in ("", finding["clause"])
        ]
        severities = {finding["severity"] for finding in findings}
        waiver.severity = "blocker" if "blocker" in severities else (sorted(severities) or [""])[0]
        waiver.needs_confirmation = "blocker" in severities
        waiver.save(update_fields=["severity", "needs_confirmation"])


class Migration(migrations.Migration):
    dependencies = [("deployments", "0002_waiver_two_reviewers")]

    operations = [migrations.RunPython(mark_blocker_waivers, migrations.RunPython.noop)]
