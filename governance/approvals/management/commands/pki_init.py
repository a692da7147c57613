"""Create the organisation's approvals PKI (root CA, timestamping key, CRL) once; idempotent."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.core.management.base import BaseCommand

from governance.approvals.choices import ROLE_GROUPS
from governance.approvals.services import certificates_sync, pki_init


class Command(BaseCommand):
    help = "Create the approvals root CA (RSA 3072) and timestamping key, and issue reviewers' certificates."

    def handle(self, *args: Any, **options: Any) -> None:
        root, created = pki_init(actor="system:pki_init")
        state = "created" if created else "already present"
        self.stdout.write(f"approvals root CA {state}: SHA-256 {root.fingerprint_sha256}")
        reviewers = User.objects.filter(groups__name__in=ROLE_GROUPS.values(), is_active=True).distinct()
        for user in reviewers:
            certificates_sync(user=user, actor="system:pki_init")
        self.stdout.write(f"signing certificates checked for {reviewers.count()} reviewer(s)")
