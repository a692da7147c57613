"""The Celery app. Tasks are thin: they take ids, load rows and call a service."""

from __future__ import annotations

import os

from celery import Celery

from governance.core.localenv import load_local_env

if "DJANGO_SETTINGS_MODULE" not in os.environ:  # the celery CLI from a checkout; never inside tests or Django
    load_local_env()  # reads the same .env as manage.py (the environment wins)
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "governance.settings")

app = Celery("governance")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
