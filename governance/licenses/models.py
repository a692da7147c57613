"""Licenses, their immutable-once-used versions and terms, FX rates, and stored evaluations."""

from __future__ import annotations

import hashlib
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator
from django.db import models

from governance.core.models import BaseModel
from governance.licenses.choices import AppliesTo, Confidence, FindingCode, LicenseDecision, Severity
from governance.licenses.engine import TermError, TermSpec

LICENSE_KEY_VALIDATOR = RegexValidator(r"^[a-z0-9][a-z0-9.-]{0,63}$", "lower-case letters, digits, dots and hyphens")


class License(BaseModel):
    key = models.CharField(
        max_length=64, unique=True, validators=[LICENSE_KEY_VALIDATOR], help_text="catalog key, e.g. llama-3.1"
    )
    name = models.CharField(max_length=200)
    scancode_key = models.CharField(max_length=100, blank=True)
    spdx_id = models.CharField(max_length=100, blank=True)
    source_url = models.URLField(max_length=500)
    notes = models.TextField(blank=True)

    class Meta:
        ordering = ["key"]

    def __str__(self) -> str:
        return self.key


class LicenseVersion(BaseModel):
    """One version of a license's terms. Immutable once an evaluation references it."""

    license = models.ForeignKey(License, on_delete=models.PROTECT, related_name="versions")
    version = models.CharField(max_length=40)
    effective_date = models.DateField()
    text = models.TextField(blank=True, help_text="the full license text, when uploaded")
    digest = models.CharField(max_length=64, blank=True, help_text="SHA-256 over the terms and text")
    published_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["license__key", "-effective_date", "-created_at"]
        constraints = [models.UniqueConstraint(fields=["license", "version"], name="license_version_unique")]

    def __str__(self) -> str:
        return f"{self.license.key} {self.version}"

    @property
    def is_locked(self) -> bool:
        return self.pk is not None and self.evaluations.exists()

    def save(self, *args: Any, **kwargs: Any) -> None:
        if self.pk is not None and self.is_locked:
            stored = LicenseVersion.objects.get(pk=self.pk)
            if (stored.text, stored.digest, stored.effective_date) != (self.text, self.digest, self.effective_date):
                raise ValidationError("this license version is referenced by evaluations and cannot change")
        super().save(*args, **kwargs)

    @property
    def text_sha256(self) -> str | None:
        return hashlib.sha256(self.text.encode()).hexdigest() if self.text else None


class LicenseTerm(models.Model):
    version = models.ForeignKey(LicenseVersion, on_delete=models.CASCADE, related_name="terms")
    position = models.PositiveSmallIntegerField(default=0)
    code = models.CharField(max_length=40, choices=FindingCode.choices)
    severity = models.CharField(max_length=12, choices=Severity.choices)
    clause = models.CharField(max_length=120)
    condition = models.TextField(help_text="CEL over `facts` and `params`, e.g. facts.mau > params.limit")
    params = models.JSONField(default=dict, blank=True)
    message = models.TextField()
    how_to_comply = models.TextField(blank=True)
    confidence = models.CharField(max_length=12, choices=Confidence.choices, default=Confidence.VERIFIED)
    applies_to = models.CharField(max_length=16, choices=AppliesTo.choices, default=AppliesTo.DEPLOYMENT)
    value_from = models.CharField(max_length=40, blank=True)

    class Meta:
        ordering = ["version", "position", "id"]

    def __str__(self) -> str:
        return f"{self.code} ({self.clause})"

    def save(self, *args: Any, **kwargs: Any) -> None:
        self._refuse_if_locked()
        super().save(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> Any:
        self._refuse_if_locked()
        return super().delete(*args, **kwargs)

    def _refuse_if_locked(self) -> None:
        if self.version_id and LicenseEvaluation.objects.filter(version_id=self.version_id).exists():
            raise ValidationError("this license version is referenced by evaluations: publish a new version instead")

    def spec(self) -> TermSpec:
        return TermSpec(
            code=self.code,
            severity=self.severity,
            clause=self.clause,
            condition=self.condition,
            message=self.message,
            how_to_comply=self.how_to_comply,
            params=self.params or {},
            confidence=self.confidence,
            applies_to=self.applies_to,
            value_from=self.value_from or None,
        )

    def clean(self) -> None:
        try:
            self.spec().validate()
        except TermError as exc:
            raise ValidationError({exc.field: str(exc)}) from None


class FxRate(models.Model):
    currency = models.CharField(
        max_length=3, unique=True, validators=[RegexValidator(r"^[A-Z]{3}$", "an ISO 4217 code like EUR")]
    )
    usd_per_unit = models.DecimalField(max_digits=20, decimal_places=10)
    as_of = models.DateField()
    source = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["currency"]

    def __str__(self) -> str:
        return f"{self.currency} = {self.usd_per_unit} USD ({self.as_of})"

    def clean(self) -> None:
        if self.usd_per_unit is not None and self.usd_per_unit <= 0:
            raise ValidationError({"usd_per_unit": "must be positive"})


class LicenseEvaluation(BaseModel):
    """A stored evaluation of a subject (e.g. a deployment request) under one license version."""

    version = models.ForeignKey(LicenseVersion, on_delete=models.PROTECT, related_name="evaluations")
    subject_type = models.CharField(max_length=64)
    subject_id = models.CharField(max_length=64)
    facts = models.JSONField()
    decision = models.CharField(max_length=32, choices=LicenseDecision.choices)
    findings = models.JSONField()
    engine_version = models.CharField(max_length=20)

    class Meta:
        ordering = ["-created_at"]
        # serves "which subjects were evaluated under this version" when a new version is published
        indexes = [models.Index(fields=["version", "subject_type", "subject_id"], name="license_eval_subject_idx")]

    def __str__(self) -> str:
        return f"{self.subject_type}:{self.subject_id} {self.decision}"


class LicenseText(BaseModel):
    """A license text found in a checkpoint (LICENSE, USE_POLICY, NOTICE), kept once per normalised
    text: the organisation keeps the original it relied on for later audit. A legal reviewer
    classifies an unknown text once, as a version the catalog knows; every artifact carrying the
    same text then matches it."""

    fingerprint = models.CharField(max_length=71, unique=True, help_text="sha256: of the normalised text")
    sha256 = models.CharField(max_length=64, help_text="SHA-256 of the bytes of the first copy seen")
    text = models.TextField()
    first_seen_path = models.CharField(max_length=200, blank=True)
    classified_as = models.ForeignKey(
        LicenseVersion, null=True, blank=True, on_delete=models.PROTECT, related_name="texts"
    )
    classified_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    classified_at = models.DateTimeField(null=True, blank=True)
    classification_note = models.TextField(blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return self.fingerprint[:19]
