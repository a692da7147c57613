from django.apps import AppConfig


class ApprovalsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "governance.approvals"

    def ready(self) -> None:
        # Importing `signals` connects the role-change receiver (certificates); the audit app asks
        # for the files of its bundle.
        from governance.approvals import model_signing, signals
        from governance.audit.signals import bundle_files
        from governance.evaluations.signals import artifact_inspected
        from governance.quantization.signals import derivative_registered

        bundle_files.connect(signals.on_bundle_files, dispatch_uid="approvals.bundle_files")
        # The files an inspection or a quantize run read are signed with the organisation's PKI.
        artifact_inspected.connect(model_signing.on_artifact_inspected, dispatch_uid="approvals.sign_inspected")
        derivative_registered.connect(model_signing.on_derivative_registered, dispatch_uid="approvals.sign_derivative")
