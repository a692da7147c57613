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
