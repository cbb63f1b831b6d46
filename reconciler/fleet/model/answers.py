"""Models: every answer of the host agent, as the bot accepts it. A host is not trusted: what
its agent says is read into the model of the verb that was asked (AgentClient.call takes the
model; there is no other way to read an answer), and an answer that does not fit makes the
host unreachable with the reason, never an error further in.

The limits on the answer's bytes (ANSWER_LINE_MAX, ONE_SHOT_MAX) are here too, beside what
they bound; the transport and the session enforce them before anything is parsed."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from reconciler.fleet.model.observed import Observed, UnitRecord

# One JSON line of the resident agent: an answer beyond it is refused, not buffered further.
ANSWER_LINE_MAX = 16 * 1024 * 1024
# A one-shot command's stdout (its answer, and a shell's noise before it) and stderr.
ONE_SHOT_MAX = ANSWER_LINE_MAX + 64 * 1024
ERRORS_MAX = 1024 * 1024


class Refused(ValueError):
    """An answer that is not one: too long, not JSON, nested too deep, or of the wrong shape.
    The message says why in a few words, without the answer's text."""


class Shown(BaseModel):
    """An answer that is shown more than acted on: its known fields checked, the rest kept."""

    model_config = ConfigDict(extra="allow", frozen=True)


class Envelope(BaseModel):
    """One answer line: ok and the result, or the error; `id` matches it to its request."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    ok: bool = False
    result: Any = None
    error: str | None = None
    unreadable: str | None = None  # the record the refusal is about: there, and not readable
    # the host cannot write at all (disk full, quota, read-only): not this call's fault alone
    host_fault: str | None = None
    id: int | None = None


class Hello(Observed):
    """The resident agent's first line: its file's digest (or that it is not installed)."""

    class Said(Observed):
        digest: str | None = None

    hello: Said | None = None
    missing: bool = False
    ok: bool | None = None


class UnreadableRecord(Observed):
    """A unit record the agent found and could not read: what runs under it is not known."""

    id: str
    path: str
    why: str


class UnitsAnswer(Observed):
    units: tuple[UnitRecord, ...] = ()
    unreadable: tuple[UnreadableRecord, ...] = ()


class Repaired(Shown):
    """One record `repair` moved aside: a lease file, or a unit record (its processes, found
    by their DENV_UNIT marker, stopped first)."""

    record: str  # lease, fence or unit
    path: str
    moved_to: str
    id: str | None = None
    stopped: tuple[int, ...] = ()


class RepairAnswer(Shown):
    host: str
    repaired: tuple[Repaired, ...] = ()


class StopAnswer(Shown):
    id: str | None = None
    stopped: bool = False
    exit_code: int | None = None


class LogsAnswer(Shown):
    lines: tuple[str, ...] = ()
    log_error: str | None = None


class Environment(Shown):
    kind: str
    name: str
    bytes: int | None = None
    in_use: bool = False
    digest: str | None = None


class CachedWeights(Shown):
    source: str
    bytes: int | None = None


class RuntimesAnswer(Shown):
    runtimes: tuple[Environment, ...] = ()
    weights: tuple[CachedWeights, ...] = ()


class PruneAnswer(Shown):
    removed: tuple[str, ...] = ()


class JobAnswer(Shown):
    """A prepare job's state: running, done or failed (fleet.prepare's JobState)."""

    id: str
    state: str
    step: str = ""
    bytes_done: int = 0
    bytes_total: int = 0
    error: str | None = None
    ready: tuple[dict[str, Any], ...] = ()
    weights: dict[str, Any] | None = None


class PassNote(Shown):
    """What a bot wrote with its lease: the parts another bot and `denv status` act on."""

    at: float | None = None
    checks: dict[str, Any] | None = None
    unreachable: dict[str, Any] | None = None


class LeaseAnswer(Observed):
    """Who holds a fleet's lease and until when (epoch seconds, by the host's clock)."""

    name: str
    held: bool
    holder: str | None = None
    expires: float | None = None
    since: float | None = None
    now: float | None = None
    # greater at each taking (the agent's fences refuse a call with an older one)
    epoch: int | None = Field(default=None, ge=0)
    note: dict[str, Any] | None = None  # checked as a PassNote, kept as written

    @field_validator("note")
    @classmethod
    def _note(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None:
            PassNote.model_validate(value)
        return value

    def left(self) -> float:
        """Seconds the lease has left, by the host's clock."""
        return max((self.expires or 0.0) - (self.now or 0.0), 0.0)


GPUS_MAX = 4096  # GPUs a node may say it has: placement makes one entry for each


class SlurmNode(Shown):
    name: str
    state: str = ""
    reason: str | None = None
    gpus: int = Field(default=0, ge=0, le=GPUS_MAX)
    gpus_used: int = Field(default=0, ge=0, le=GPUS_MAX)


class ClusterAnswer(Observed):
    nodes: tuple[SlurmNode, ...] = ()
    jobs: tuple[UnitRecord, ...] = ()


class CancelAnswer(Shown):
    id: str | None = None
    stopped: bool = False


def decode(line: bytes) -> Any:
    """Pure: one line of JSON as an answer; Refused (with why) for anything else."""
    if len(line) > ANSWER_LINE_MAX:
        raise Refused(f"an answer line over {ANSWER_LINE_MAX // (1024 * 1024)} MiB")
    try:
        return json.loads(line)
    except RecursionError:
        raise Refused("an answer nested too deep") from None
    except ValueError as exc:  # not JSON, not UTF-8, an integer of too many digits
        raise Refused(f"not JSON ({type(exc).__name__})") from None


def why(error: ValidationError) -> str:
    """Pure: what was wrong with an answer, by field, without the host's values."""
    parts = []
    for problem in error.errors(include_input=False, include_url=False)[:3]:
        where = ".".join(str(part) for part in problem["loc"]) or "the answer"
        parts.append(f"{where}: {problem['msg']}")
    more = error.error_count() - len(parts)
    return "; ".join(parts) + (f" (and {more} more)" if more > 0 else "")
