"""Pure logic: pydantic validation errors -> `Problem`s that name file, line and field."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from reconciler.errors import Problem

Locate = Callable[[Sequence[str | int]], tuple[int, int]]


_ABSENT = object()


def _child(node: Any, key: str | int) -> Any:
    if isinstance(node, dict) and key in node:
        return node[key]
    if isinstance(node, list) and isinstance(key, int) and 0 <= key < len(node):
        return node[key]
    return _ABSENT


def data_path(data: Any, loc: Sequence[str | int], keep_last: bool) -> tuple[str | int, ...]:
    """The part of a pydantic `loc` that names places in the data (drops union tags)."""
    path: list[str | int] = []
    node = data
    for index, key in enumerate(loc):
        child = _child(node, key)
        if child is not _ABSENT:
            node = child
        elif not (keep_last and index == len(loc) - 1):
            continue
        path.append(key)
    return tuple(path)


def dotted(path: Sequence[str | int]) -> str:
    text = ""
    for key in path:
        text += f"[{key}]" if isinstance(key, int) else (f".{key}" if text else str(key))
    return text or "(file)"


def _message(error: ErrorDetails) -> str:
    kind = error["type"]
    if kind == "extra_forbidden":
        return "unknown field"
    if kind == "missing":
        return "missing required field"
    message = error["msg"]
    for prefix in ("Value error, ", "Assertion failed, "):
        message = message.removeprefix(prefix)
    value = error.get("input")
    if kind.endswith(("_type", "_parsing")) and not isinstance(value, dict | list):
        message = f"{message} (got {value!r})"
    return message


def from_validation(
    path: str, data: Any, exc: ValidationError, locate: Locate, base: Sequence[str | int] = ()
) -> list[Problem]:
    """One problem per place in the file; alternatives of a union are joined with 'or'."""
    grouped: dict[tuple[str | int, ...], list[str]] = {}
    for error in exc.errors():
        at = [error["ctx"]["at"]] if error["type"] == "field_error" else []  # spec/base.py
        where = data_path(data, [*base, *error["loc"], *at], keep_last=error["type"] == "missing")
        message = _message(error)
        if message not in grouped.setdefault(where, []):
            grouped[where].append(message)
    problems = []
    for where, messages in grouped.items():
        line, col = locate(where)
        problems.append(Problem(path, line, col, f"{dotted(where)}: {' or '.join(messages)}"))
    return problems
