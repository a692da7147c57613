"""A model artifact: one checkpoint, identified by the digest of its files' manifest."""

from __future__ import annotations

from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models

from governance.core.models import BaseModel, Team
from governance.licenses.models import License, LicenseVersion

DIGEST_VALIDATOR = RegexValidator(r"^sha256:[0-9a-f]{64}$", "must be 'sha256:' followed by 64 lower-case hex digits")


class Derivation(models.TextChoices):
    NONE = "none"
    FINE_TUNE = "fine_tune"
    QUANTIZE = "quantize"
    DISTILL = "distill"
    MERGE = "merge"


class Modality(models.TextChoices):
    TEXT = "text"
    MULTIMODAL = "multimodal"


class ModelArtifact(BaseModel):
    team = models.ForeignKey(Team, on_delete=models.PROTECT, related_name="artifacts")
    name = models.CharField(max_length=200)
    source_repo = models.CharField(max_length=300, help_text="e.g. moonshotai/Kimi-K2-Instruct")
    revision = models.CharField(max_length=100, help_text="commit or tag of the source repo")
    # Unique per team, not across teams (Meta.constraints): two teams may hold the same published
    # checkpoint, and a global check would tell one team which weights another holds.
    weights_digest = models.CharField(max_length=71, validators=[DIGEST_VALIDATOR])
    license = models.ForeignKey(License, on_delete=models.PROTECT, related_name="artifacts")
    license_version = models.ForeignKey(LicenseVersion, on_delete=models.PROTECT, related_name="artifacts")
    architecture_key = models.CharField(max_length=64, blank=True, help_text="planner catalog key")
    config = models.JSONField(null=True, blank=True, help_text="the checkpoint's config.json, when not a catalog key")
    modality = models.CharField(max_length=12, choices=Modality.choices, default=Modality.TEXT)
    quantization_config = models.JSONField(null=True, blank=True)
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.PROTECT, related_name="derivatives")
    # An artifact is used by its own team only, unless its team shares it with another one.
    shared_with = models.ManyToManyField(Team, related_name="shared_artifacts", blank=True)
    derivation = models.CharField(max_length=12, choices=Derivation.choices, default=Derivation.NONE)
    merged_with = models.ManyToManyField("self", blank=True, symmetrical=False, related_name="merged_into")
    registered_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")

    class Meta:
        ordering = ["name", "-created_at"]
        constraints = [
            # serves artifact_digest_registered(digest, team) and the quantize job's rerun check
            models.UniqueConstraint(fields=["team", "weights_digest"], name="artifact_digest_unique_per_team"),
        ]

    def __str__(self) -> str:
        return f"{self.name}@{self.revision}"

    def lineage(self) -> list[ModelArtifact]:
        """This artifact, its ancestors and every merged-in artifact (and theirs), each once."""
        seen: dict[int, ModelArtifact] = {}
        pending: list[ModelArtifact] = [self]
        while pending:
            artifact = pending.pop()
            if artifact.pk in seen:
                continue
            seen[artifact.pk] = artifact
            if artifact.parent_id:
                pending.append(artifact.parent)  # type: ignore[arg-type]
            pending.extend(artifact.merged_with.all())
        return list(seen.values())

    def license_versions(self) -> list[LicenseVersion]:
        """A derivative inherits its parents' terms; a merge combines every license involved."""
        versions: dict[int, LicenseVersion] = {}
        for artifact in self.lineage():
            versions[artifact.license_version_id] = artifact.license_version
        return sorted(versions.values(), key=lambda v: (v.license.key, v.version))


class ArtifactSignature(BaseModel):
    """The artifact's files as an OpenSSF model-signing bundle: the in-toto statement of every file's
    SHA-256 (its subject digest is the artifact's weights digest), DSSE-signed with the organisation's
    model-signing key. Made once the service holds a manifest read from the files themselves (an
    inspection on the node, or the quantize job's own report); `model_signing verify certificate`
    checks it on a serving node (docs/inspection.md)."""

    artifact = models.OneToOneField(ModelArtifact, on_delete=models.CASCADE, related_name="signature")
    bundle = models.TextField(help_text="Sigstore bundle (JSON) holding the DSSE-signed in-toto statement")
    bundle_sha256 = models.CharField(max_length=64)
    signer_sha256 = models.CharField(max_length=64, help_text="SHA-256 of the model-signing certificate")
    source = models.CharField(max_length=16, help_text="what read the files: inspection or quantize")

    def __str__(self) -> str:
        return f"signature of {self.artifact} ({self.bundle_sha256[:12]})"
