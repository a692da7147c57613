"""The gate's vocabulary: decisions and reason codes (each with who must act to clear it)."""

from __future__ import annotations

from django.db import models

from governance.deployments.readiness import UNQUANTIZED_PRECISIONS, ReasonCode


class Decision(models.TextChoices):
    ALLOW = "allow"
    DENY = "deny"


# The vocabulary of reasons is the readiness rule's (the gate adds its deploy-time codes there too).
__all__ = ["UNQUANTIZED_PRECISIONS", "Decision", "ReasonCode"]
