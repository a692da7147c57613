from django.contrib import admin

from governance.capacity.models import CapacityPlan


@admin.register(CapacityPlan)
class CapacityPlanAdmin(admin.ModelAdmin):
    list_display = ("code", "status", "fits", "subject_type", "subject_id", "planner_version", "created_at")
    list_filter = ("status", "fits")
    readonly_fields = ("code", "inputs", "result", "fits", "status", "error", "planner_version", "computed_at")
