"""Models and pure logic: faults a simulator injects on demand.

`Faults` is what flags and `POST /admin/faults` set; `FaultState` applies them, given the
time by its caller (it reads no clock). Which requests fail is decided by a seeded hash of
the request's ordinal, so a run with the same seed fails the same requests.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, NonNegativeFloat, PositiveInt

from reconciler.engines.model.tokens import mix64
from reconciler.spec.base import Spec


class Faults(Spec):
    """Faults to inject. Times are wall-clock seconds, except `spike_ms`, which is modelled
    time added to every engine step (divided by the time scale like the step itself)."""

    warmup_s: NonNegativeFloat | None = None  # slow start: /health says 503 this long (again)
    crash_after: PositiveInt | None = None  # the process exits non-zero after N more answers
    error_rate: float = Field(default=0.0, ge=0, le=1)  # fraction of requests answered 500
    spike_ms: NonNegativeFloat = 0.0  # extra modelled ms per engine step
    spike_s: NonNegativeFloat | None = None  # how long the spike lasts; None: until cleared
    hang: bool = False  # the engine loop stalls and /health stops answering
    seed: int = 0  # decides which requests the error rate hits


CRASH_EXIT_CODE = 70  # EX_SOFTWARE: what the process exits with when `crash_after` fires


class FaultState:
    """The faults in force, and the counters they need."""

    def __init__(self, faults: Faults, now: float) -> None:
        self.faults = Faults()
        self.ready_at = now
        self.spike_until: float | None = None
        self.requests = 0  # requests seen since the error rate was set
        self.answered = 0  # answers since crash_after was set
        self.apply(faults.model_dump(exclude_unset=True), now)

    def apply(self, patch: dict[str, Any], now: float) -> None:
        """Merge the given fields into the faults in force (ValidationError if bad)."""
        merged = Faults.model_validate({**self.faults.model_dump(), **patch})
        if "warmup_s" in patch and merged.warmup_s is not None:
            self.ready_at = now + merged.warmup_s
        if "spike_ms" in patch or "spike_s" in patch:
            self.spike_until = None if merged.spike_s is None else now + merged.spike_s
        if "crash_after" in patch:
            self.answered = 0
        if "error_rate" in patch or "seed" in patch:
            self.requests = 0
        self.faults = merged

    def ready(self, now: float) -> bool:
        return now >= self.ready_at

    def extra_step_s(self, now: float) -> float:
        """Modelled seconds a latency spike adds to a step starting now."""
        if not self.faults.spike_ms:
            return 0.0
        if self.spike_until is not None and now >= self.spike_until:
            return 0.0
        return self.faults.spike_ms / 1000

    def admit(self) -> bool:
        """Count one request; False when the error rate says to answer it 500."""
        ordinal = self.requests
        self.requests += 1
        rate = self.faults.error_rate
        if rate <= 0:
            return True
        draw = mix64(mix64(self.faults.seed) ^ ordinal)
        return (draw >> 11) / float(1 << 53) >= rate

    def answered_one(self) -> bool:
        """Count one answer; True when the process should crash now."""
        self.answered += 1
        limit = self.faults.crash_after
        return limit is not None and self.answered >= limit

    def view(self, now: float) -> dict[str, Any]:
        """What `GET /admin/faults` shows."""
        return {
            **self.faults.model_dump(),
            "ready": self.ready(now),
            "spike_active": self.extra_step_s(now) > 0,
            "requests": self.requests,
            "answered": self.answered,
        }
