"""Events the licenses app announces; the deployments app re-evaluates its requests on them."""

from django.dispatch import Signal

# Sent after commit with `license_key=` when a new license version becomes current.
version_published = Signal()
# Sent after commit with `fingerprint=` when a legal reviewer classifies a license text found in a
# checkpoint: requests whose artifacts carry it are re-evaluated.
text_classified = Signal()
