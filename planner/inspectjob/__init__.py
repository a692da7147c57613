"""The inspection payload that runs ON the cluster node where a checkpoint lives: what the artifact's
own files say it is (precision, tensors, lineage, license texts), read without Django and without
loading a tensor. `python -m planner.inspectjob DIR --out result.json` (docs/inspection.md)."""

from planner.inspectjob.checkpoint import inspect_checkpoint
from planner.inspectjob.licenses import license_fingerprint, normalise_license_text
from planner.inspectjob.report import FORMAT, InspectionRefused, InspectionReport, InspectLimits

__all__ = [
    "FORMAT",
    "InspectLimits",
    "InspectionRefused",
    "InspectionReport",
    "inspect_checkpoint",
    "license_fingerprint",
    "normalise_license_text",
]
