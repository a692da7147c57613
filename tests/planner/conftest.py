"""Planner fixtures: the corpus's leave-one-source-out refits, computed once per process."""

from __future__ import annotations

import pytest

from planner import corpus


@pytest.fixture(scope="session")
def corpus_held_out() -> tuple[corpus.HeldOut, ...]:
    """`corpus.leave_one_source_out()`: every source's cases scored with the factors refitted without it,
    about 18 s of CPU. The record (test_corpus_record), the issue-31 bounds (test_leave_one_source_out)
    and the committed interval residuals (test_intervals) read the same refits: computed once here rather
    than once each. A tuple of frozen results, so no test can change what another reads; the tests that
    take it are all `cpu_bound`, so they run in one of scripts/test-suite's serial lanes and share it."""
    return tuple(corpus.leave_one_source_out())
