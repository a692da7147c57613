from django.apps import AppConfig


class ApprovalsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "governance.approvals"

    def ready(self) -> None:
        # Role changes issue or revoke signing certificates.
        from governance.approvals import signals  # noqa: F401
        from governance.approvals.selectors import approval_bundle_files
        from governance.audit.exports import BUNDLE_FILE_PROVIDERS

        BUNDLE_FILE_PROVIDERS.append(approval_bundle_files)
