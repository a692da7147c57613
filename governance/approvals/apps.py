from django.apps import AppConfig


class ApprovalsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "governance.approvals"

    def ready(self) -> None:
        # Importing `signals` connects the role-change receiver (certificates); the audit app asks
        # for the files of its bundle.
        from governance.approvals import signals
        from governance.audit.signals import bundle_files

        bundle_files.connect(signals.on_bundle_files, dispatch_uid="approvals.bundle_files")
