"""Events the audit app announces to apps above it."""

from django.dispatch import Signal

# Sent while an audit bundle is written; each receiver returns an iterable of (name, bytes) files to
# add, each listed in the manifest with its SHA-256 (the approvals app adds the signed packets).
bundle_files = Signal()
