"""Events the quantization app announces; receivers connect in AppConfig.ready() so this app imports no app above it."""

from django.dispatch import Signal

# Sent after commit with `artifact=` (the derivative) and `manifest=` (the node's manifest of its files,
# checked against its digest) when a quantize run registered what it made.
derivative_registered = Signal()
