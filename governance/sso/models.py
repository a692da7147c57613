"""Which provider account a user is: (issuer, subject) from the ID token, never the e-mail address
(an address can be re-assigned, and matching on it would hand a local account to whoever the
provider asserts that address for)."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models


class ExternalIdentity(models.Model):
    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="external_identity")
    issuer = models.CharField(max_length=255)
    subject = models.CharField(max_length=255)
    created_at = models.DateTimeField(auto_now_add=True)
    last_login_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            # serves the look-up at every sign-in: WHERE issuer = ? AND subject = ?
            models.UniqueConstraint(fields=["issuer", "subject"], name="sso_identity_issuer_subject_uniq"),
        ]

    def __str__(self) -> str:
        return f"{self.issuer} {self.subject}"


class StepUp(models.Model):
    """One fresh sign-in at the provider (a step-up), good for one signature. Recorded by the
    sign-in callback; its id is kept in the session, and a sign-off takes it (`used_at`) in its
    own transaction with a conditional UPDATE: of concurrent sign-offs on one step-up exactly
    one takes it, and a sign-off refused later rolls the take back with everything else."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="step_ups")
    auth_time = models.DateTimeField(help_text="the ID token's auth_time: when the provider authenticated the user")
    created_at = models.DateTimeField(auto_now_add=True)
    used_at = models.DateTimeField(null=True, blank=True, help_text="when a sign-off took it")

    def __str__(self) -> str:
        return f"step-up of {self.user_id} at {self.auth_time:%Y-%m-%dT%H:%M:%SZ}"
