"""Pure logic: one line of a JSON Lines file (results, parity suites, traffic) -> plain values,
or one `Problem` at the line and column of what is refused: text that is not JSON, nesting
Python cannot follow, an integer longer than `bounds.MAX_INT_DIGITS`. Every JSON Lines reader
of denv's own files goes through `read_line`, so a new field cannot reopen what it refuses.
"""

from __future__ import annotations

import json
from typing import Any

from reconciler.errors import Problem
from reconciler.spec.bounds import integer_refusal


class _LongInteger(ValueError):
    def __init__(self, literal: str, reason: str) -> None:
        super().__init__(reason)
        self.literal = literal
        self.reason = reason


def _bounded_int(literal: str) -> int:
    reason = integer_refusal(literal)
    if reason is not None:
        raise _LongInteger(literal, reason)
    return int(literal)


def read_line(path: str, number: int, line: str) -> tuple[Any, Problem | None]:
    """The values of JSON text `line` (line `number` of `path`), or the problem with it."""
    try:
        return json.loads(line, parse_int=_bounded_int), None
    except _LongInteger as exc:
        col = line.find(exc.literal) + 1 or 1
        return None, Problem(path, number, col, exc.reason)
    except json.JSONDecodeError as exc:
        return None, Problem(path, number, exc.colno, f"not JSON: {exc.msg}")
    except RecursionError:
        return None, Problem(path, number, 1, "not JSON: nested too deeply")
    except ValueError as exc:  # anything else Python refuses to make of the text
        return None, Problem(path, number, 1, f"not JSON: {exc}")
