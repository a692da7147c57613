"""Executors that run job payloads: locally (subprocess) or on a Slurm cluster over SSH. No Django."""

from planner.cluster.base import (
    ClusterError,
    Executor,
    JobOutput,
    JobRef,
    JobSpec,
    JobState,
    JobStatus,
)

__all__ = ["ClusterError", "Executor", "JobOutput", "JobRef", "JobSpec", "JobState", "JobStatus"]
