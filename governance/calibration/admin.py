from django.contrib import admin

from governance.calibration.models import CalibrationRun


@admin.register(CalibrationRun)
class CalibrationRunAdmin(admin.ModelAdmin):
    list_display = ["code", "cluster", "gpu", "model", "status", "gpu_name", "created_at"]
    list_filter = ["status", "gpu"]
    # Profiles are measurements: written by the job hook, never edited by hand.
    readonly_fields = [f.name for f in CalibrationRun._meta.fields]

    def has_add_permission(self, request):
        return False
