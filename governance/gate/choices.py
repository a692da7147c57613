"""The gate's vocabulary: decisions and reason codes (each with who must act to clear it)."""

from __future__ import annotations

from django.db import models


class Decision(models.TextChoices):
    ALLOW = "allow"
    DENY = "deny"


class ReasonCode(models.TextChoices):
    """Every reason a gate check can deny; README's reason-code table lists the same."""

    NOT_APPROVED = "deployment.not_approved"
    REVOKED = "approval.revoked"
    EXPIRED = "approval.expired"
    ENVIRONMENT_NOT_APPROVED = "environment.not_approved"
    SIGNATURE_MISSING = "signature.missing"
    SIGNATURE_STALE = "signature.stale"
    SIGNATURE_INVALID = "signature.invalid"
    LICENSE_BLOCKER = "license.blocker"
    LICENSE_APPROVAL_REQUIRED = "license.licensor_approval_required"
    OBLIGATION_NOT_ACCEPTED = "obligation.not_accepted"
    USAGE_THRESHOLD_CROSSED = "usage.threshold_crossed"
    CAPACITY_MISSING = "capacity.missing"
    CAPACITY_DOES_NOT_FIT = "capacity.does_not_fit"
    EVAL_MISSING = "eval.missing"
    EVAL_FAILED = "eval.failed"
    EVAL_DIGEST_MISMATCH = "eval.digest_mismatch"  # the passed eval served other weights
    EVAL_STALE = "eval.stale"  # same weights, but another engine, engine version or parallel layout
    ARTIFACT_DIGEST_MISMATCH = "artifact.digest_mismatch"
    SERVING_ENGINE = "serving.engine_mismatch"
    SERVING_PRECISION = "serving.precision_mismatch"
    SERVING_KV_DTYPE = "serving.kv_dtype_mismatch"
    SERVING_GPU = "serving.gpu_mismatch"
    SERVING_PARALLELISM = "serving.parallelism_mismatch"
    SERVING_MAX_MODEL_LEN = "serving.max_model_len_exceeded"
    SERVING_MEMORY_UTILIZATION = "serving.gpu_memory_utilization_exceeded"


# Precisions served without quantizing the weights: no quantization eval is needed for them.
UNQUANTIZED_PRECISIONS = frozenset({"bf16"})
