"""Events the deployments app announces to apps above it (approvals, gate, web)."""

from django.dispatch import Signal

# Sent inside the transaction with `deployment=`, `actor=` and `reason=` when the evidence digest of
# a request changed (its sign-offs on the old digest were just voided).
evidence_changed = Signal()
