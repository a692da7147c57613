"""Which provider account a user is: (issuer, subject) from the ID token, never the e-mail address
(an address can be re-assigned, and matching on it would hand a local account to whoever the
provider asserts that address for)."""

from __future__ import annotations

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
