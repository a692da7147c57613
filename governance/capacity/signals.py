"""Events the capacity app announces; apps above it (deployments) connect receivers in their AppConfig.ready()."""

from django.dispatch import Signal

# Sent after commit with `plan=` each computed (done or failed) CapacityPlan.
plan_computed = Signal()

# Sent when a plan names a `cluster` (kwargs: cluster=code, gpu=catalog key); a receiver answers with
# that cluster's calibration profile for the GPU (planner.calibrate.profile.CalibrationProfile) or
# None, and raises the 400 when the cluster does not exist. The calibration app, above, receives it.
calibration_wanted = Signal()
