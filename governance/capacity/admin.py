from django.contrib import admin

from governance.capacity.models import CapacityPlan
from governance.core.admin_base import ReadOnlyModelAdmin


@admin.register(CapacityPlan)
class CapacityPlanAdmin(ReadOnlyModelAdmin):
    # A plan is evidence: computed by the worker, never edited or deleted by hand.
    list_display = ("code", "status", "fits", "deployment", "planner_version", "created_at")
    list_filter = ("status", "fits")
    readonly_fields = ("code", "inputs", "result", "fits", "status", "error", "planner_version", "computed_at")
