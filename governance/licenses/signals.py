"""Events the licenses app announces; the deployments app re-evaluates its requests on them."""

from django.dispatch import Signal

# Sent after commit with `license_key=` when a new license version becomes current.
version_published = Signal()
