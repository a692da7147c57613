"""Events the capacity app announces; apps above it (deployments) connect receivers in their AppConfig.ready()."""

from django.dispatch import Signal

# Sent after commit with `plan=` each computed (done or failed) CapacityPlan.
plan_computed = Signal()
