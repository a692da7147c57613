"""Audit tests reason about absolute seq numbers: they start from an empty chain.

Creating the personas (roles, team members) writes `user.roles_changed` and
`team.members_changed` events; here they are wiped as a database superuser would, so each
test's own events start at seq 1.
"""

from __future__ import annotations

import pytest
from django.db import connection

from governance.audit.triggers import triggers_suspended
from tests.conftest import Personas


@pytest.fixture
def personas(personas: Personas) -> Personas:
    with triggers_suspended(connection), connection.cursor() as cursor:
        for table in ("audit_auditevent", "audit_auditcheckpoint", "audit_auditchainhead"):
            cursor.execute(f"DELETE FROM {table}")
    return personas
