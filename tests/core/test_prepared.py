"""Prepared statements (core.prepared) pass through the connection's execute wrappers as Django's own
cursors do, so whatever counts or times queries (the UI bench, instrumentation) sees them."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection

from governance.core.prepared import fetch_all_prepared, fetch_one_prepared


@pytest.mark.postgres
@pytest.mark.django_db
def test_a_prepared_statement_passes_through_execute_wrappers() -> None:
    seen: list[tuple[str, Any, Any]] = []

    def wrapper(execute: Any, sql: str, params: Any, many: bool, context: dict[str, Any]) -> Any:
        seen.append((sql, params, context["cursor"]))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(wrapper):
        row = fetch_one_prepared("SELECT %s::int + 1 AS answer", [41])
    assert row == {"answer": 42}
    assert len(seen) == 1
    assert seen[0][0] == "SELECT %s::int + 1 AS answer"
    assert seen[0][1] == [41]
    assert seen[0][2] is not None


@pytest.mark.postgres
@pytest.mark.django_db
def test_rows_come_back_named_by_their_columns_and_a_statement_without_rows_as_none() -> None:
    # The rows are named from the result itself (not cursor.description): every row, every column.
    rows = fetch_all_prepared(
        "SELECT n, n * 2 AS twice, %s::text AS label FROM generate_series(1, 3) AS n ORDER BY n", ["x"]
    )
    assert rows == [{"n": n, "twice": 2 * n, "label": "x"} for n in (1, 2, 3)]
    assert fetch_one_prepared("SELECT 1 AS one WHERE false", []) is None
    # no result set at all: an UPDATE without RETURNING
    assert fetch_all_prepared("UPDATE auth_user SET last_name = last_name WHERE id = %s", [0]) == []
