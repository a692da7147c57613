"""Clusters and job runs: the Django side of planner.cluster (SSH + Slurm, or local)."""
