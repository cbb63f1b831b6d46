"""Models: what the load generator records of each request — times, token counts from the
engine's usage, and how it failed — before any statistic is taken (metrics.py does that).

Times are seconds on the run's monotonic clock, counted from the start of the run.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import NonNegativeFloat, NonNegativeInt, PositiveInt

from reconciler.spec.base import Spec


class ErrorKind(StrEnum):
    CONNECT = "connect"  # no answer at all: refused, reset or closed before a status line
    TIMEOUT = "timeout"  # nothing arrived for the request timeout
    HTTP = "http"  # an error status; the record's `status` says which
    STREAM = "stream"  # the stream broke off before its end ([DONE])
    SERVER = "server"  # the engine sent an error event inside the stream
    EMPTY = "empty"  # the stream ended without a single output token


class RequestRecord(Spec):
    index: NonNegativeInt  # the request's line in the trace
    scheduled_s: NonNegativeFloat | None = None  # open loop: when the trace says to send it
    sent_s: NonNegativeFloat
    chunks_s: tuple[NonNegativeFloat, ...] = ()  # arrival of every chunk carrying output
    done_s: NonNegativeFloat  # the end of the answer, or of the attempt
    input_length: PositiveInt  # tokens asked for (the trace line)
    output_length: PositiveInt
    prompt_tokens: NonNegativeInt | None = None  # the engine's usage, when it reports it
    output_tokens: NonNegativeInt | None = None
    error: ErrorKind | None = None
    status: int | None = None  # HTTP status of an error answer
    detail: str | None = None  # the first 200 characters of the engine's error message

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def error_label(self) -> str | None:
        """What `errors_by_kind` counts: `http_503`, `timeout`, …"""
        if self.error is None:
            return None
        if self.error is ErrorKind.HTTP and self.status is not None:
            return f"http_{self.status}"
        return self.error.value

    @property
    def tokens(self) -> int:
        """Output tokens: the engine's usage, else one a chunk (no usage in the stream)."""
        return self.output_tokens if self.output_tokens is not None else len(self.chunks_s)
