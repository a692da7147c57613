from django.apps import AppConfig


class ApprovalsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "governance.approvals"

    def ready(self) -> None:
        # Importing `signals` connects the role-change receiver (certificates); the apps below
        # announce evidence changes and audit bundles, and this app listens.
        from governance.approvals import signals
        from governance.audit.signals import bundle_files
        from governance.deployments.signals import evidence_changed

        evidence_changed.connect(signals.on_evidence_changed, dispatch_uid="approvals.evidence_changed")
        bundle_files.connect(signals.on_bundle_files, dispatch_uid="approvals.bundle_files")
