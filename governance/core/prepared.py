"""Hot statements through server-side prepared statements.

Django's PostgreSQL backend binds parameters on the client and never prepares, so PostgreSQL plans
every statement on every call. For a hand-written statement on a hot path the plan can cost more
than running it (the gate's one read: ~0.6 ms of its 0.8 ms). psycopg 3 prepares a statement per
connection when asked (settings: a `prepare_threshold` no statement reaches, so only these are);
with persistent connections (CONN_MAX_AGE) each worker connection plans it once.

Errors arrive as Django's database errors (the write services' deadlock retry reads them), the
statement is logged like Django's own (connection.queries, CaptureQueriesContext), and other
backends (SQLite) use an ordinary cursor."""

from __future__ import annotations

import functools
import time
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

from django.db import connection


def fetch_one_prepared(sql: str, params: Sequence[Any] | Mapping[str, Any]) -> dict[str, Any] | None:
    """The first row of `sql` (`%s` or `%(name)s` placeholders) as a dict of column name to the
    driver's value (JSON columns may arrive as text: parse them), or None. On PostgreSQL the
    statement passes through the connection's execute wrappers (connection.execute_wrapper), as
    Django's own cursors do, so whatever counts or times queries sees it too."""
    rows = _run(sql, params, many=False)
    return rows[0] if rows else None


def fetch_all_prepared(sql: str, params: Sequence[Any] | Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every row of `sql`, as fetch_one_prepared gives one."""
    return _run(sql, params, many=True)


def _run(sql: str, params: Sequence[Any] | Mapping[str, Any], *, many: bool) -> list[dict[str, Any]]:
    connection.ensure_connection()
    started = time.monotonic()
    rows: list[dict[str, Any]] = []

    def execute(cursor: Any, sql: str, params: Any, many_: bool, context: dict[str, Any]) -> None:
        cursor.execute(sql, params, prepare=True)
        if cursor.pgresult is not None and cursor.pgresult.nfields:
            rows.extend(cursor.fetchall() if many else cursor.fetchmany(1))

    with connection.wrap_database_errors:
        if connection.vendor == "postgresql":
            import psycopg
            from psycopg.rows import dict_row

            # Server-side binding (can prepare); rows as dicts named from the result itself.
            # Not from cursor.description: it builds a Column (type lookup, encoding) per column on
            # every access, which for the gate's 49-column read cost more CPU than loading the row.
            with psycopg.Cursor(connection.connection, row_factory=dict_row) as cursor:
                executor = partial(execute, cursor)
                for wrapper in reversed(connection.execute_wrappers):
                    executor = partial(wrapper, executor)
                executor(sql, params, False, {"connection": connection, "cursor": cursor})
        else:
            with connection.cursor() as django_cursor:
                django_cursor.execute(sql, params)
                if django_cursor.description:
                    names = [column[0] for column in django_cursor.description]
                    found = django_cursor.fetchall() if many else django_cursor.fetchmany(1)
                    rows.extend(dict(zip(names, row, strict=True)) for row in found)
    if connection.queries_logged:
        connection.queries_log.append(
            {"sql": f"{sql} -- prepared, params {params!r}", "time": f"{time.monotonic() - started:.3f}"}
        )
    return rows


def instance_from_row(model: Any, row: dict[str, Any], prefix: str = "") -> Any:
    """`model`'s instance from the read's columns named `prefix` + column (the others deferred),
    through the converters the ORM's compiler applies (JSON from text, SQLite's UUIDs and dates)."""
    names, values = [], []
    for key, attname, column, converters in _columns(model, prefix, connection.vendor):
        if key not in row:
            continue
        value = row[key]
        for convert in converters:
            value = convert(value, column, connection)
        names.append(attname)
        values.append(value)
    return model.from_db(connection.alias, names, values)


@functools.cache
def _columns(model: Any, prefix: str, vendor: str) -> tuple[tuple[str, str, Any, tuple[Any, ...]], ...]:
    """Per model: each concrete field's (row key, attname, column expression, converters), in the
    model's field order (as from_db takes them); worked out once per process, not per check."""
    table = model._meta.db_table
    plan = []
    for field in model._meta.concrete_fields:
        column = field.get_col(table)
        converters = tuple(connection.ops.get_db_converters(column) + column.get_db_converters(connection))
        plan.append((prefix + field.column, field.attname, column, converters))
    return tuple(plan)
