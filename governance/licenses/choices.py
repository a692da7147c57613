"""The license enums, in one place: models, the API and the policy engine all use these."""

from django.db import models


class FindingCode(models.TextChoices):
    ATTRIBUTION_DISPLAY = "attribution.display"
    ATTRIBUTION_NOTICE = "attribution.notice"
    LICENSE_COPY = "license.copy"
    MODIFIED_FILES_NOTICE = "modified_files.notice"
    NAMING_PREFIX = "naming.prefix"
    USE_RESTRICTIONS_PASSTHROUGH = "use_restrictions.passthrough"
    THRESHOLD_LICENSOR_APPROVAL = "threshold.licensor_approval"
    REGISTRATION_REQUIRED = "registration.required"
    HOSTING_SEPARATE_LICENSE = "hosting.separate_license"
    USE_NON_COMMERCIAL = "use.non_commercial"
    USE_RESEARCH_ONLY = "use.research_only"
    USE_NON_PRODUCTION = "use.non_production"
    OUTPUTS_TRAINING_PROHIBITED = "outputs.training_prohibited"
    TERRITORY_RESTRICTED = "territory.restricted"
    AUP_PROHIBITED_USE = "aup.prohibited_use"
    GUARDRAIL_BYPASS_TERMINATES = "guardrail.bypass_terminates"


# The engine's own finding (not a license term): a fact was missing and a conservative default was assumed.
FACTS_ASSUMED = "facts.assumed"


class Severity(models.TextChoices):
    """Declared from most to least severe: findings sort in this order."""

    BLOCKER = "blocker"
    APPROVAL = "approval"
    OBLIGATION = "obligation"
    INFO = "info"


# Findings that stop an approval until waived (a blocker with the licensor's permission and a second legal
# reviewer's confirmation; an approval finding with the licensor's approval recorded as a waiver).
BLOCKING_SEVERITIES: tuple[str, ...] = (Severity.BLOCKER, Severity.APPROVAL)


class Confidence(models.TextChoices):
    VERIFIED = "verified", "verified (read in the license text)"
    SECONDARY = "secondary", "secondary (quoted by others)"
    UNVERIFIED = "unverified", "unverified"


class AppliesTo(models.TextChoices):
    DEPLOYMENT = "deployment"
    DERIVATIVES = "derivatives"
    REDISTRIBUTION = "redistribution"
    OUTPUTS = "outputs"


class LicenseDecision(models.TextChoices):
    """What the license engine concludes for a set of facts (derived from the findings' severities)."""

    PROHIBITED = "prohibited"
    LICENSOR_APPROVAL_REQUIRED = "licensor_approval_required"
    ALLOWED_WITH_OBLIGATIONS = "allowed_with_obligations"
    ALLOWED = "allowed"


# Which severities a license may give each finding code (naming.prefix is an obligation or, when
# the name cannot carry the prefix, a blocker).
ALLOWED_SEVERITIES: dict[str, tuple[str, ...]] = {
    FindingCode.ATTRIBUTION_DISPLAY: (Severity.OBLIGATION,),
    FindingCode.ATTRIBUTION_NOTICE: (Severity.OBLIGATION,),
    FindingCode.LICENSE_COPY: (Severity.OBLIGATION,),
    FindingCode.MODIFIED_FILES_NOTICE: (Severity.OBLIGATION,),
    FindingCode.NAMING_PREFIX: (Severity.OBLIGATION, Severity.BLOCKER),
    FindingCode.USE_RESTRICTIONS_PASSTHROUGH: (Severity.OBLIGATION,),
    FindingCode.THRESHOLD_LICENSOR_APPROVAL: (Severity.APPROVAL,),
    FindingCode.REGISTRATION_REQUIRED: (Severity.APPROVAL,),
    FindingCode.HOSTING_SEPARATE_LICENSE: (Severity.APPROVAL,),
    FindingCode.USE_NON_COMMERCIAL: (Severity.BLOCKER,),
    FindingCode.USE_RESEARCH_ONLY: (Severity.BLOCKER,),
    FindingCode.USE_NON_PRODUCTION: (Severity.BLOCKER,),
    FindingCode.OUTPUTS_TRAINING_PROHIBITED: (Severity.BLOCKER,),
    FindingCode.TERRITORY_RESTRICTED: (Severity.BLOCKER,),
    FindingCode.AUP_PROHIBITED_USE: (Severity.BLOCKER,),
    FindingCode.GUARDRAIL_BYPASS_TERMINATES: (Severity.BLOCKER,),
}
