"""The one JSON parser every API view uses: hostile bodies become a 4xx naming the field, never a 500.

Checked here, before any serializer sees the data, so no view can forget them:
- a body larger than API_MAX_BODY_BYTES -> 413 (the limit is sized for the largest advertised upload, eval_set);
- nesting deeper than API_MAX_JSON_DEPTH -> 400 (the stdlib decoder recurses and would raise RecursionError);
- integers outside canonical JSON's safe range (|n| > 2**53 - 1), NaN and Infinity -> 400 naming the field,
  because audit hashes use canonical JSON, which cannot represent them;
- NUL characters and lone surrogates in keys or strings -> 400 naming the field (PostgreSQL refuses them).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from governance.core.errors import ApplicationError, invalid_input

MAX_SAFE_INTEGER = 2**53 - 1
_BAD_CHARS = re.compile("[\x00\ud800-\udfff]")


def body_too_large(limit: int) -> ApplicationError:
    return ApplicationError(
        f"Request body too large: the limit is {limit} bytes.", extra={"max_bytes": limit}, status=413
    )


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _path(parent: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{parent}[{key}]" if parent else f"[{key}]"
    return f"{parent}.{key}" if parent else key


def _string_problem(text: str) -> str | None:
    found = _BAD_CHARS.search(text)
    if found is None:
        return None
    return "contains a NUL character" if found.group() == "\x00" else "contains a lone surrogate (invalid Unicode)"


def check_json_value(value: Any, max_depth: int) -> None:
    """Walk the decoded value iteratively (no recursion) and raise a 400 naming the first bad field."""
    stack: list[tuple[str, Any, int]] = [("", value, 0)]
    while stack:
        path, item, depth = stack.pop()
        if depth > max_depth:
            raise invalid_input(path or "non_field_errors", f"nested deeper than {max_depth} levels")
        if isinstance(item, bool) or item is None or isinstance(item, float):
            continue
        if isinstance(item, int):
            if abs(item) > MAX_SAFE_INTEGER:
                raise invalid_input(path or "non_field_errors", "integer out of range (|n| must be <= 2**53 - 1)")
        elif isinstance(item, str):
            problem = _string_problem(item)
            if problem:
                raise invalid_input(path or "non_field_errors", problem)
        elif isinstance(item, dict):
            for key, child in item.items():
                problem = _string_problem(key)
                if problem:
                    raise invalid_input(_path(path, key.encode("unicode_escape").decode("ascii")), f"key {problem}")
                stack.append((_path(path, key), child, depth + 1))
        elif isinstance(item, list):
            for index, child in enumerate(item):
                stack.append((_path(path, index), child, depth + 1))


class SafeJSONParser(JSONParser):
    def parse(self, stream: Any, media_type: str | None = None, parser_context: Mapping[str, Any] | None = None) -> Any:
        limit = settings.API_MAX_BODY_BYTES
        raw = stream.read(limit + 1) if stream is not None else b""
        if len(raw) > limit:
            raise body_too_large(limit)
        encoding = (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
        try:
            text = raw.decode(encoding)
        except UnicodeDecodeError as exc:
            raise ParseError(f"JSON parse error - body is not valid {encoding}") from exc
        try:
            data = json.loads(text, parse_constant=_reject_constant)
        except RecursionError:
            raise invalid_input(
                "non_field_errors", f"nested deeper than {settings.API_MAX_JSON_DEPTH} levels"
            ) from None
        except ValueError as exc:  # includes integers with more digits than int() accepts
            raise ParseError(f"JSON parse error - {exc}") from None
        check_json_value(data, settings.API_MAX_JSON_DEPTH)
        return data
