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


class Severity(models.TextChoices):
    BLOCKER = "blocker"
    APPROVAL = "approval"
    OBLIGATION = "obligation"
    INFO = "info"


class Confidence(models.TextChoices):
    VERIFIED = "verified", "verified (read in the license text)"
    SECONDARY = "secondary", "secondary (quoted by others)"
    UNVERIFIED = "unverified", "unverified"


class AppliesTo(models.TextChoices):
    DEPLOYMENT = "deployment"
    DERIVATIVES = "derivatives"
    REDISTRIBUTION = "redistribution"
    OUTPUTS = "outputs"


class Decision(models.TextChoices):
    PROHIBITED = "prohibited"
    LICENSOR_APPROVAL_REQUIRED = "licensor_approval_required"
    ALLOWED_WITH_OBLIGATIONS = "allowed_with_obligations"
    ALLOWED = "allowed"
