"""SQL that makes the audit tables append-only, for PostgreSQL and SQLite.

Row triggers refuse UPDATE and DELETE; on PostgreSQL a statement trigger refuses TRUNCATE
(row triggers do not fire on TRUNCATE). The chain-head row may only advance one seq at a time
(what an append does) and is never deleted, so nobody without superuser rights can point the
next checkpoint at a forged head. A database superuser can still bypass all of them
(session_replication_role, or dropping them): checkpoints published outside the database expose that.
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


HEAD_TABLE = "audit_auditchainhead"

_PG_HEAD_FUNCTION = """
CREATE OR REPLACE FUNCTION audit_head_advance_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND NEW.id = OLD.id AND NEW.seq = OLD.seq + 1 THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION '% only advances one seq per append: % refused', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'insufficient_privilege';
END $$;
"""


def head_create_statements(vendor: str) -> list[str]:
    """The chain head: an UPDATE must advance seq by exactly one; DELETE and TRUNCATE are refused."""
    if vendor == "postgresql":
        return [
            _PG_HEAD_FUNCTION,
            f"CREATE TRIGGER {HEAD_TABLE}_advance_only BEFORE UPDATE OR DELETE ON {HEAD_TABLE} "
            "FOR EACH ROW EXECUTE FUNCTION audit_head_advance_only();",
            f"CREATE TRIGGER {HEAD_TABLE}_no_truncate BEFORE TRUNCATE ON {HEAD_TABLE} "
            "FOR EACH STATEMENT EXECUTE FUNCTION audit_refuse_change();",
        ]
    if vendor == "sqlite":
        return [
            f"CREATE TRIGGER IF NOT EXISTS {HEAD_TABLE}_advance_only BEFORE UPDATE ON {HEAD_TABLE} "
            "WHEN NEW.id <> OLD.id OR NEW.seq <> OLD.seq + 1 "
            f"BEGIN SELECT RAISE(ABORT, '{HEAD_TABLE} only advances one seq per append: UPDATE refused'); END;",
            f"CREATE TRIGGER IF NOT EXISTS {HEAD_TABLE}_no_delete BEFORE DELETE ON {HEAD_TABLE} "
            f"BEGIN SELECT RAISE(ABORT, '{HEAD_TABLE} only advances one seq per append: DELETE refused'); END;",
        ]
    raise NotImplementedError(f"append-only triggers are not written for {vendor}")


def head_drop_statements(vendor: str) -> list[str]:
    if vendor == "postgresql":
        return [
            f"DROP TRIGGER IF EXISTS {HEAD_TABLE}_advance_only ON {HEAD_TABLE};",
            f"DROP TRIGGER IF EXISTS {HEAD_TABLE}_no_truncate ON {HEAD_TABLE};",
            "DROP FUNCTION IF EXISTS audit_head_advance_only();",
        ]
    return [f"DROP TRIGGER IF EXISTS {HEAD_TABLE}_advance_only;", f"DROP TRIGGER IF EXISTS {HEAD_TABLE}_no_delete;"]


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
            for sql in drop_statements(connection.vendor) + head_drop_statements(connection.vendor):
                cursor.execute(sql)
            try:
                yield
            finally:
                with connection.cursor() as restore_cursor:
                    for sql in create_statements(connection.vendor) + head_create_statements(connection.vendor):
                        restore_cursor.execute(sql)
