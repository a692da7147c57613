"""Capacity plans: the Django side of the planner library (API, stored plans, Celery task)."""
