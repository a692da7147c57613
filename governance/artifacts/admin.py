from django.contrib import admin

from governance.artifacts.models import ModelArtifact
from governance.core.admin_base import ReadOnlyModelAdmin


@admin.register(ModelArtifact)
class ModelArtifactAdmin(ReadOnlyModelAdmin):
    # Registered and changed through the artifact services (license pinning, lineage checks, audit).
    list_display = ("name", "revision", "team", "license", "derivation", "weights_digest")
    list_filter = ("license", "derivation", "modality")
    search_fields = ("name", "source_repo", "weights_digest")
    readonly_fields = ("weights_digest", "license_version")
