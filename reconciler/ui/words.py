"""How the pages write figures and times (jinja filters)."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from typing import Any

from reconciler.spec.words import counted


def short(revision: str | None) -> str:
    return revision[:12] if revision else "—"


def ago(at: float | None) -> str:
    if at is None:
        return "never"
    return duration(max(0.0, time.time() - at)) + " ago"


def duration(seconds: float) -> str:
    seconds = round(seconds)
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def stamp(at: float | dt.datetime | None) -> str:
    if at is None:
        return "—"
    when = at if isinstance(at, dt.datetime) else dt.datetime.fromtimestamp(at, dt.UTC)
    return f"{when:%Y-%m-%d %H:%M:%S} UTC"


def number(value: float | None, digits: int = 1) -> str:
    """A figure, or '…' where the source does not give it (as `denv bench` writes it)."""
    if value is None:
        return "…"
    return f"{value:,.{digits}f}"


def percent(fraction: float | None) -> str:
    return "…" if fraction is None else f"{fraction * 100:.0f}%"


FILTERS: dict[str, Callable[..., Any]] = {
    "short": short,
    "ago": ago,
    "duration": duration,
    "stamp": stamp,
    "number": number,
    "percent": percent,
    "counted": counted,
}
