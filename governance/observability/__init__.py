"""Operations' view of the service: Prometheus metrics at /metrics (see docs/operations.md)."""
