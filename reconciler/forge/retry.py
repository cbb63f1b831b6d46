"""Pure logic: when to ask GitHub again, and after how long.

5xx answers are retried with exponential backoff, or after their `Retry-After`. A rate limit
(403 or 429) waits what GitHub says: `Retry-After` seconds, or until `X-RateLimit-Reset` when
`X-RateLimit-Remaining` is 0. A 403 without those signs is a refusal (no permission) and is
not retried. A wait longer than the policy's `max_wait` is not taken: the caller reports
when the limit resets.
Sleeping and the clock are parameters, so tests never wait.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 6
    backoff: float = 1.0  # the first wait after a 5xx; doubles each time
    max_wait: float = 900.0
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.time


def _header(headers: Mapping[str, object], name: str) -> str | None:
    for key, value in headers.items():
        if key.lower() == name:
            return str(value)
    return None


def _seconds(text: str | None) -> float | None:
    try:
        return None if text is None else float(text)
    except ValueError:
        return None  # an HTTP date in Retry-After: GitHub sends seconds; fall back to backoff


def rate_limit_wait(headers: Mapping[str, object], now: float) -> float | None:
    """Seconds GitHub asks us to wait, if its headers say."""
    after = _seconds(_header(headers, "retry-after"))
    if after is not None:
        return max(after, 0.0)
    reset = _seconds(_header(headers, "x-ratelimit-reset"))
    if _header(headers, "x-ratelimit-remaining") == "0" and reset is not None:
        return max(reset - now, 0.0) + 1.0  # the reset second itself may still be limited
    return None


def wait_before_retry(
    status: int, headers: Mapping[str, object], attempt: int, now: float, backoff: float
) -> float | None:
    """Seconds to wait before attempt `attempt + 1`, or None: do not retry this answer."""
    if status in (403, 429):
        asked = rate_limit_wait(headers, now)
        if asked is not None:
            return asked
        return backoff * 2.0 ** (attempt - 1) if status == 429 else None
    if status >= 500:
        asked = _seconds(_header(headers, "retry-after"))  # a 503 may say when to come back
        return backoff * 2.0 ** (attempt - 1) if asked is None else max(asked, 0.0)
    return None
