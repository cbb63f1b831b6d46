"""Models: what a parity run found — per prompt how the two answers matched, and the verdict
over the suite (`PARITY 497/512`). Only answer tokens at the first divergence are kept; no
prompt text is."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict

END = "<end>"  # the token shown where one answer has ended and the other goes on


class Match(StrEnum):
    EXACT = "exact"  # every greedy token equal
    TOLERANT = "tolerant"  # first differing tokens in each other's top-k; a pass when tolerant
    DIVERGED = "diverged"

    def passes(self, mode: Literal["strict", "tolerant"]) -> bool:
        return self is Match.EXACT or (self is Match.TOLERANT and mode == "tolerant")


class Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Divergence(Record):
    """The first position where the answers differ, and each side's token there."""

    position: int  # 0-based, in answer tokens
    reference: str
    candidate: str
    in_top_k: bool  # each token among the other side's top-k alternatives there


class Outcome(Record):
    id: str
    match: Match
    passed: bool
    divergence: Divergence | None = None


class Verdict(Record):
    headline: str  # PARITY passed/total
    suite: str
    mode: Literal["strict", "tolerant"]
    top_k: int
    reference: str  # URLs, shown without credentials
    candidate: str
    total: int
    passed: int
    exact: int
    tolerant: int  # passes by the top-k rule (counted in `passed` only when mode is tolerant)
    ok: bool  # every prompt passed
    failures: tuple[Outcome, ...]  # in suite order
    tolerated: tuple[Outcome, ...]  # answers that differ within the top-k, in suite order
    elapsed_s: float


def compile_verdict(
    suite: str,
    mode: Literal["strict", "tolerant"],
    top_k: int,
    reference: str,
    candidate: str,
    outcomes: list[Outcome],
    elapsed_s: float,
) -> Verdict:
    """The verdict over every prompt's outcome (in suite order)."""
    passed = sum(o.passed for o in outcomes)
    return Verdict(
        headline=f"PARITY {passed}/{len(outcomes)}",
        suite=suite,
        mode=mode,
        top_k=top_k,
        reference=reference,
        candidate=candidate,
        total=len(outcomes),
        passed=passed,
        exact=sum(o.match is Match.EXACT for o in outcomes),
        tolerant=sum(o.match is Match.TOLERANT for o in outcomes),
        ok=passed == len(outcomes),
        failures=tuple(o for o in outcomes if not o.passed),
        tolerated=tuple(o for o in outcomes if o.match is Match.TOLERANT),
        elapsed_s=round(elapsed_s, 3),
    )
