"""Base model and the identity records shared by every app: teams and hashed API tokens."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models


class BaseModel(models.Model):
    """Integer PKs stay inside the database; `code` is the public id used in URLs and APIs."""

    code = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True


class Team(BaseModel):
    """Teams own deployment requests; requesters see their team's requests only."""

    name = models.CharField(max_length=120, unique=True)
    members = models.ManyToManyField(settings.AUTH_USER_MODEL, related_name="teams", blank=True)
    # Team leads may issue and revoke the team's CI tokens (an admin may for any team).
    leads = models.ManyToManyField(settings.AUTH_USER_MODEL, related_name="led_teams", blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class ApiToken(BaseModel):
    """A bearer token for machines (CI, billing). Only its SHA-256 is stored.

    `prefix` (the first characters of the token) is kept in clear to find the row without
    scanning; the digest comparison is constant-time. A token with scopes reaches only the
    endpoints of its scopes (core.tokens.SCOPE_ENDPOINTS), and only the requests of `team`
    (all of them, or those in `deployment_codes` when given) in `environments` (any when empty).
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=120)
    prefix = models.CharField(max_length=16, db_index=True)  # serves the lookup on every request
    digest = models.CharField(max_length=64, unique=True)
    scopes = models.JSONField(default=list, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    team = models.ForeignKey(Team, null=True, blank=True, on_delete=models.PROTECT, related_name="api_tokens")
    deployment_codes = models.JSONField(default=list, blank=True)  # request UUIDs as strings; empty: all of team
    environments = models.JSONField(default=list, blank=True)  # empty: any environment
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"


class OutboxMessage(models.Model):
    """A Celery task to send, written in the transaction of the change that wants it (transactional
    outbox): a broker that is down when the change commits delays the task, it never loses it nor
    turns a saved change into a 500.

    Sent after commit; acknowledged by the worker when the task has finished successfully; re-sent by
    beat (core.outbox_flush) while unsent or unacknowledged past OUTBOX_LEASE_S, up to
    OUTBOX_MAX_ATTEMPTS sends. Every task sent this way is idempotent (it claims its row with a lease),
    so a re-send after a lost acknowledgement does the work once."""

    task = models.CharField(max_length=120)
    args = models.JSONField(default=list, blank=True)
    kwargs = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    sent_at = models.DateTimeField(null=True, blank=True)
    acked_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.CharField(max_length=300, blank=True)

    class Meta:
        ordering = ["created_at"]
        indexes = [
            # beat's scan: the unacknowledged rows only (a partial index stays small as rows are acked)
            models.Index(fields=["sent_at"], name="outbox_pending", condition=models.Q(acked_at__isnull=True))
        ]

    def __str__(self) -> str:
        return f"{self.task}{tuple(self.args)} ({'acked' if self.acked_at else 'pending'})"
