"""Events the core app announces; the audit app (above it) records them on the trail.

Each is sent inside the transaction of the change, so the audit event commits or rolls back with it.
"""

from django.dispatch import Signal

# `token=`, `actor=`: a token was issued / revoked.
api_token_issued = Signal()
api_token_revoked = Signal()
# `team=`, `actor=`: a team was created (its members and leads are announced by Django's m2m signals).
team_created = Signal()
# `obj=`, `actor=`, `created=`, `fields=` (names of changed fields): an admin saved a record.
admin_object_saved = Signal()
# `obj=`, `actor=`, `bulk=`: an admin is deleting a record (sent before the delete).
admin_object_deleted = Signal()
