"""The gate's vocabulary: decisions and reason codes (each with who must act to clear it)."""

from __future__ import annotations

from django.db import models

from governance.deployments.readiness import UNQUANTIZED_PRECISIONS, ReasonCode


class GateOutcome(models.TextChoices):
    """The gate's answer to CI (a row of the decision log, GateDecision, stores it)."""

    ALLOW = "allow"
    DENY = "deny"


# The vocabulary of reasons is the readiness rule's (the gate adds its deploy-time codes there too).
__all__ = ["UNQUANTIZED_PRECISIONS", "GateOutcome", "ReasonCode"]
