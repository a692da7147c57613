"""Events the calibration app announces; apps above it (deployments) connect receivers in their AppConfig.ready()."""

from django.dispatch import Signal

# Sent after commit with `log=` each recorded StartupLog (a request's evidence holds the logs of its deployment).
startup_log_recorded = Signal()
