"""Model-license and deployment-readiness governance service."""

from governance.celery import app as celery_app

__all__ = ["celery_app"]
