"""Events the deployments app announces to apps above it (approvals, gate, web)."""

from django.dispatch import Signal

# Sent inside the transaction with `deployment=` and `actor=` when a request is submitted or the
# serving plan / artifact of a submitted request changes (its evidence must be recomputed).
deployment_submitted = Signal()

# Sent inside the transaction with `deployment=`, `actor=` and `reason=` when the evidence digest of
# a request changed (its sign-offs on the old digest were just voided).
evidence_changed = Signal()
