"""SQL that makes the audit tables append-only, for PostgreSQL and SQLite.

Row triggers refuse UPDATE and DELETE; on PostgreSQL a statement trigger refuses TRUNCATE
(row triggers do not fire on TRUNCATE). A database superuser can still bypass them
(session_replication_role, or dropping them): signed checkpoints expose that.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.db.backends.base.base import BaseDatabaseWrapper

TABLES = ("audit_auditevent", "audit_auditcheckpoint")

_PG_FUNCTION = """
CREATE OR REPLACE FUNCTION audit_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% is append-only: % refused', TG_TABLE_NAME, TG_OP USING ERRCODE = 'insufficient_privilege';
END $$;
"""


def _pg_create(table: str) -> list[str]:
    return [
        f"CREATE TRIGGER {table}_no_update_delete BEFORE UPDATE OR DELETE ON {table} "
        "FOR EACH ROW EXECUTE FUNCTION audit_refuse_change();",
        f"CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table} "
        "FOR EACH STATEMENT EXECUTE FUNCTION audit_refuse_change();",
    ]


def _sqlite_create(table: str) -> list[str]:
    return [
        f"CREATE TRIGGER IF NOT EXISTS {table}_no_{op.lower()} BEFORE {op} ON {table} "
        f"BEGIN SELECT RAISE(ABORT, '{table} is append-only: {op} refused'); END;"
        for op in ("UPDATE", "DELETE")
    ]


def create_statements(vendor: str) -> list[str]:
    if vendor == "postgresql":
        return [_PG_FUNCTION] + [sql for table in TABLES for sql in _pg_create(table)]
    if vendor == "sqlite":
        return [sql for table in TABLES for sql in _sqlite_create(table)]
    raise NotImplementedError(f"append-only triggers are not written for {vendor}")


def drop_statements(vendor: str) -> list[str]:
    if vendor == "postgresql":
        return [
            f"DROP TRIGGER IF EXISTS {table}_{suffix} ON {table};"
            for table in TABLES
            for suffix in ("no_update_delete", "no_truncate")
        ] + ["DROP FUNCTION IF EXISTS audit_refuse_change();"]
    return [f"DROP TRIGGER IF EXISTS {table}_no_{op};" for table in TABLES for op in ("update", "delete")]


@contextmanager
def triggers_suspended(connection: BaseDatabaseWrapper) -> Iterator[None]:
    """What a database superuser can do: used by tamper tests and the test suite's table flush."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SET session_replication_role = replica")
            try:
                yield
            finally:
                with connection.cursor() as reset_cursor:
                    reset_cursor.execute("RESET session_replication_role")
        else:
            for sql in drop_statements(connection.vendor):
                cursor.execute(sql)
            try:
                yield
            finally:
                with connection.cursor() as restore_cursor:
                    for sql in create_statements(connection.vendor):
                        restore_cursor.execute(sql)
