from django.contrib import admin

from governance.calibration.models import CalibrationRun, StartupLog
from governance.core.admin_base import ReadOnlyModelAdmin


@admin.register(CalibrationRun)
class CalibrationRunAdmin(ReadOnlyModelAdmin):
    # Profiles are measurements: written by the job hook, never edited by hand.
    list_display = ["code", "cluster", "gpu", "model", "status", "gpu_name", "created_at"]
    list_filter = ["status", "gpu"]


@admin.register(StartupLog)
class StartupLogAdmin(ReadOnlyModelAdmin):
    # Measurements held against a plan: recorded through the service (audited), never edited by hand.
    list_display = ["code", "cluster", "gpu", "engine", "engine_version", "kv_pool_residual_bytes", "created_at"]
    list_filter = ["engine", "gpu"]
