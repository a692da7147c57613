"""tests.planner.requests.PlanArgs states PlanRequest's keyword arguments, field for field."""

from __future__ import annotations

import dataclasses
import typing

from planner.plan import PlanRequest
from tests.planner.requests import PlanArgs, plan_request


def test_plan_args_name_every_plan_request_field() -> None:
    assert list(typing.get_type_hints(PlanArgs)) == [f.name for f in dataclasses.fields(PlanRequest)]


def test_later_parts_and_keywords_win() -> None:
    request = plan_request({"model": "llama-3.1-8b", "precision": "bf16", "gpu": "h100-80g", "tp": 1}, {"tp": 2}, tp=4)
    assert (request.model, request.tp, request.kv_dtype) == ("llama-3.1-8b", 4, "bf16")
