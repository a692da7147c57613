"""Events the artifacts app announces; receivers connect in AppConfig.ready() so this app imports no app above it."""

from django.dispatch import Signal

# Sent after commit with `artifact=` when what the evidence says of an artifact changed (its parent).
artifact_changed = Signal()
