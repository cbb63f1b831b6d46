"""When GitHub is asked again, and after how long: pure, table-driven."""

from __future__ import annotations

import pytest

from reconciler.forge.retry import wait_before_retry

NOW = 1_000.0


@pytest.mark.parametrize(
    ("status", "headers", "attempt", "wait"),
    [
        (502, {}, 1, 2.0),
        (502, {}, 3, 8.0),
        (503, {"Retry-After": "5"}, 1, 5.0),
        (403, {"Retry-After": "30"}, 1, 30.0),
        (429, {"retry-after": "3"}, 1, 3.0),
        (403, {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "1060"}, 1, 61.0),
        (403, {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "900"}, 1, 1.0),
        (403, {"X-RateLimit-Remaining": "12", "X-RateLimit-Reset": "1060"}, 1, None),
        (403, {}, 1, None),
        (429, {}, 2, 4.0),
        (404, {}, 1, None),
        (422, {}, 1, None),
    ],
    ids=[
        "5xx",
        "5xx-backoff",
        "5xx-retry-after",
        "retry-after",
        "429-retry-after",
        "reset",
        "reset-passed",
        "not-exhausted",
        "forbidden",
        "429-backoff",
        "not-found",
        "invalid",
    ],
)
def test_wait_before_retry(
    status: int, headers: dict[str, str], attempt: int, wait: float | None
) -> None:
    assert wait_before_retry(status, headers, attempt, NOW, backoff=2.0) == wait
