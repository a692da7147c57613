"""Append-only audit events, the single chain-head row that serializes appends, and signed checkpoints.

The database refuses UPDATE/DELETE/TRUNCATE on events and checkpoints (migration 0002).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from governance.audit.actions import AuditAction


class AuditChainHead(models.Model):
    """Exactly one row (id=1). Appenders lock it with SELECT … FOR UPDATE, so the chain cannot fork."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1)
    seq = models.BigIntegerField(default=0)
    hash = models.CharField(max_length=64)

    def __str__(self) -> str:
        return f"head seq={self.seq}"


class AuditEvent(models.Model):
    seq = models.BigIntegerField(unique=True)  # gapless from 1; also the export order
    occurred_at = models.DateTimeField(db_index=True)  # serves time-range filters of exports
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    actor_name = models.CharField(max_length=150, blank=True)  # snapshot: survives a deleted user
    action = models.PositiveSmallIntegerField(choices=AuditAction.choices)
    object_type = models.CharField(max_length=64, blank=True)
    object_id = models.CharField(max_length=64, blank=True)
    request_id = models.CharField(max_length=64, blank=True)
    data = models.JSONField(default=dict)
    body = models.TextField()  # exact canonical JSON (RFC 8785) that is hashed
    prev_hash = models.CharField(max_length=64, unique=True)  # a second child of one event is a fork
    hash = models.CharField(max_length=64, unique=True)

    class Meta:
        ordering = ["seq"]
        indexes = [
            # the per-object timeline: WHERE object_type = ? AND object_id = ? ORDER BY seq
            models.Index(fields=["object_type", "object_id", "seq"], name="audit_event_object_idx"),
            # exports filtered by action
            models.Index(fields=["action", "seq"], name="audit_event_action_idx"),
        ]

    def __str__(self) -> str:
        return f"#{self.seq} {self.get_action_display()}"


class AuditCheckpoint(models.Model):
    """A signed statement "the chain had head `head_hash` at `seq`", published outside the database."""

    seq = models.BigIntegerField(db_index=True)
    head_hash = models.CharField(max_length=64)
    origin = models.CharField(max_length=200)
    signed_at = models.DateTimeField()
    body = models.TextField()  # canonical JSON of {origin, seq, head_hash, time}: the signed bytes
    signature = models.CharField(max_length=128)  # base64 Ed25519 signature over `body`
    key_id = models.CharField(max_length=64)  # SHA-256 of the raw public key, hex

    class Meta:
        ordering = ["seq", "id"]

    def __str__(self) -> str:
        return f"checkpoint seq={self.seq}"
