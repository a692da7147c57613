from django.contrib import admin

from governance.canary.models import CanaryAnalysis
from governance.core.admin_base import ReadOnlyModelAdmin


@admin.register(CanaryAnalysis)
class CanaryAnalysisAdmin(ReadOnlyModelAdmin):
    # Evidence: written by the analysis job and the reviewer's decision (services), never by hand.
    list_display = ["code", "deployment", "status", "digest", "endpoint", "created_at", "finished_at"]
    list_filter = ["status"]
