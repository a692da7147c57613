"""Model artifacts: the exact weights (by digest), their license, architecture and lineage."""
