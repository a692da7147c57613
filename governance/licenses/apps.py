from django.apps import AppConfig


class LicensesConfig(AppConfig):
    name = "governance.licenses"
    label = "licenses"
    verbose_name = "Licenses"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # The audit bundle carries every license text found in a checkpoint (the audit app asks).
        from governance.audit.signals import bundle_files
        from governance.licenses.selectors import license_text_bundle_files

        def on_bundle_files(sender: object, **kwargs: object) -> object:
            return license_text_bundle_files()

        bundle_files.connect(on_bundle_files, weak=False, dispatch_uid="licenses.bundle_files")
