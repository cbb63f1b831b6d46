"""Pure logic: what differs between a running unit and the unit that should replace it, named
the way an operator reads it — the engine flag or setting, the GPUs, the port.

argv is read as a command followed by flags, each with the values up to the next flag. A
flag whose value is a JSON object (the simulator's `--spec-json`) is compared key by key, so
a changed setting shows as `--spec-json recipe.settings.max_batch`, not as two long strings.
The agent does not report a unit's environment: when argv, GPUs and port are all the same
and the digest is not, the environment is what changed.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Sequence
from typing import Any, Literal

from reconciler.engines.units import Unit
from reconciler.fleet.model.observed import UnitRecord
from reconciler.spec.base import Spec

_NUMBER = re.compile(r"^-\d")
COMMAND = "(command)"


class Change(Spec):
    field: Literal["argv", "env", "gpus", "port"]
    name: str | None = None  # the flag (and setting path), for argv
    old: str | None = None  # None: absent before
    new: str | None = None  # None: absent after


def _is_flag(token: str) -> bool:
    return token.startswith("-") and not _NUMBER.match(token) and token != "-"


def split_argv(argv: Sequence[str]) -> dict[str, str]:
    """{COMMAND: the words before the first flag, flag: its values joined by spaces}; a flag
    given more than once has its occurrences joined with ' | '."""
    found: dict[str, list[str]] = {}
    name, values = COMMAND, list[str]()
    for token in argv:
        if _is_flag(token):
            found.setdefault(name, []).append(" ".join(values))
            name, equals, value = token.partition("=")
            values = [value] if equals else []
        else:
            values.append(token)
    found.setdefault(name, []).append(" ".join(values))
    return {flag: " | ".join(parts) for flag, parts in found.items()}


Difference = tuple[str, str | None, str | None]  # path, old, new (None: absent)


def _json_paths(old: Any, new: Any, prefix: str) -> list[Difference]:
    """(path, old, new) of every leaf that differs, descending only where values differ."""
    if old == new:
        return []
    if isinstance(old, dict) and isinstance(new, dict):
        found: list[Difference] = []
        for key in [*new, *(k for k in old if k not in new)]:
            inner = f"{prefix}.{key}" if prefix else str(key)
            if key not in old:
                found.append((inner, None, _shown(new[key])))
            elif key not in new:
                found.append((inner, _shown(old[key]), None))
            else:
                found += _json_paths(old[key], new[key], inner)
        return found
    return [(prefix, _shown(old), _shown(new))]


def _shown(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def _json_object(text: str | None) -> dict[str, Any] | None:
    if not text or not text.startswith("{"):
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


@functools.lru_cache(maxsize=1024)
def _value_changes(name: str, was: str | None, now: str | None) -> tuple[Change, ...]:
    """Cached: every replica of a deployment changes the same way (a roll repeats it)."""
    old_json, new_json = _json_object(was), _json_object(now)
    if old_json is None or new_json is None:
        return (Change(field="argv", name=name, old=was, new=now),)
    return tuple(
        Change(field="argv", name=f"{name} {path}", old=old, new=new)
        for path, old, new in _json_paths(old_json, new_json, "")
    )


def argv_changes(old: Sequence[str], new: Sequence[str]) -> list[Change]:
    before, after = split_argv(old), split_argv(new)
    changes: list[Change] = []
    for name in [*after, *(n for n in before if n not in after)]:
        was, now = before.get(name), after.get(name)
        if was != now:
            changes += _value_changes(name, was, now)
    return changes


def _gpus(indices: Sequence[int]) -> str:
    return ",".join(map(str, indices))


def unit_changes(record: UnitRecord, unit: Unit) -> list[Change]:
    """What a replace changes, in the order: argv, GPUs, port, environment."""
    changes = argv_changes(record.argv, unit.argv)
    if tuple(record.gpus) != tuple(unit.gpu_indices):
        changes.append(Change(field="gpus", old=_gpus(record.gpus), new=_gpus(unit.gpu_indices)))
    if record.port != unit.port:
        changes.append(
            Change(
                field="port",
                old=None if record.port is None else str(record.port),
                new=None if unit.port is None else str(unit.port),
            )
        )
    return changes or [Change(field="env")]
