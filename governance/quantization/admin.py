from django.contrib import admin

from governance.core.admin_base import ReadOnlyModelAdmin
from governance.quantization.models import QuantizeRun


@admin.register(QuantizeRun)
class QuantizeRunAdmin(ReadOnlyModelAdmin):
    """Written by the services only: the lineage of a registered derivative is evidence."""

    list_display = ["code", "recipe_name", "derivative_name", "status", "flagged", "created_at"]
    list_filter = ["status", "flagged", "recipe_name"]
