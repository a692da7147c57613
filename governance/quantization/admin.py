from django.contrib import admin

from governance.quantization.models import QuantizeRun


@admin.register(QuantizeRun)
class QuantizeRunAdmin(admin.ModelAdmin):
    list_display = ["code", "recipe_name", "derivative_name", "status", "flagged", "created_at"]
    list_filter = ["status", "flagged", "recipe_name"]
    # Written by the services only: the lineage of a registered derivative is evidence.
    readonly_fields = [f.name for f in QuantizeRun._meta.fields]

    def has_add_permission(self, request: object) -> bool:
        return False
