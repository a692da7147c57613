from django.contrib import admin

from governance.artifacts.models import ModelArtifact


@admin.register(ModelArtifact)
class ModelArtifactAdmin(admin.ModelAdmin):
    list_display = ("name", "revision", "team", "license", "derivation", "weights_digest")
    list_filter = ("license", "derivation", "modality")
    search_fields = ("name", "source_repo", "weights_digest")
    readonly_fields = ("weights_digest", "license_version")
