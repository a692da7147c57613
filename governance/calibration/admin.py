from django.contrib import admin

from governance.calibration.models import CalibrationRun
from governance.core.admin_base import ReadOnlyModelAdmin


@admin.register(CalibrationRun)
class CalibrationRunAdmin(ReadOnlyModelAdmin):
    # Profiles are measurements: written by the job hook, never edited by hand.
    list_display = ["code", "cluster", "gpu", "model", "status", "gpu_name", "created_at"]
    list_filter = ["status", "gpu"]
