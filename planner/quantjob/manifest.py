"""Moved to planner.manifest (the cluster payloads' one home for manifest hashing); kept as an alias
while branches that import the old path are merged."""

from planner.manifest import *  # noqa: F403
from planner.manifest import manifest_digest, manifest_line, resolve_inside_roots  # noqa: F401
