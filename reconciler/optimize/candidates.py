"""Models and pure logic: a study's candidates and the table `denv optimize candidates` shows.

Each candidate is a row: what it changes from the current recipe, its figures (the mean of
its runs), its parity verdict, and its status — trialing, verified, or rejected with the
reason. The current release is measured the same way and kept apart as the baseline; the
table shows each figure with its change against it (+12% / −5% / = within 1%). A row that
went through verification carries that comparison (verify.Gain: the means of its interleaved
repeats and the gain); its goal cell, its status reason and its pull request all show that one
comparison, computed once.
"""

from __future__ import annotations

import datetime as dt
from enum import StrEnum
from typing import Any

from pydantic import Field

from reconciler.bench.traffic_stats import TraceStats
from reconciler.optimize.goal import Goal, Served, higher_is_better
from reconciler.optimize.verify import Gain, percent
from reconciler.spec.base import Spec
from reconciler.spec.result import Metrics

SAME = 0.01  # figures within 1% of the current one show '='


class Status(StrEnum):
    TRIALING = "trialing"
    VERIFIED = "verified"
    INCONCLUSIVE = "inconclusive"  # verification could not decide: noise; retriable
    REJECTED = "rejected"


class Probe(Spec):
    """One run of a capacity search: the traffic at a speed, and whether it held."""

    speed: float  # × the traffic's recorded arrival rate
    rate: float  # requests/s sent
    goal: float | None
    miss: str | None = None
    stopped_early: bool = False


class Run(Spec):
    """One measurement of a candidate (or of the current release) on the traffic: the run at
    the highest rate that held the target (capacity.py), with the runs its search tried."""

    metrics: Metrics
    goal: float | None  # the goal's figure for this run
    miss: str | None = None  # why it missed the latency target; None when it met it
    stopped_early: bool = False  # cut short: it clearly missed the target
    speed: float | None = None  # × the traffic's recorded rate
    rate: float | None = None  # requests/s sent: the capacity, when it held
    tried: list[Probe] = []  # the search's runs, in the order they ran
    served: Served | None = None  # goodput and output tok/s at its rate (goal.py)
    # the load generator fell behind its own schedule in this run: it measured the client,
    # not the deployment, so it is no evidence (evidence() leaves it out of every mean)
    client_behind: bool = False


def evidence(runs: list[Run]) -> list[Run]:
    """The runs that are evidence about a deployment: every run but those in which the load
    generator fell behind its schedule. The one rule for every mean, gain and judgement."""
    return [run for run in runs if not run.client_behind]


class Row(Spec):
    id: str
    change: str  # human-readable difference from the current recipe
    # What the release's denv.yaml says once it is promoted (space.ReleaseEdit).
    recipe: str | None = None
    overrides: dict[str, Any] = {}
    topology: dict[str, Any] | None = None
    gpus: int
    answers: str | None = None  # verify.answer_levers of its recipe
    trial: int | None = None  # the optuna trial's number
    status: Status = Status.TRIALING
    reason: str | None = None  # why rejected, or why verification was inconclusive
    retry: str | None = None  # inconclusive: the command that verifies it again
    predicted: float | None = None  # the pre-screen's goal figure (simulator's model)
    runs: list[Run] = []
    gain: Gain | None = None
    parity: str | None = None  # e.g. "pass (tolerant, 20 of 20 prompts agree)"
    parity_passed: bool | None = None
    pr: int | None = None  # the pull request it became
    at: dt.datetime

    def mean(self, pick: str) -> float | None:
        """Mean over the runs that are evidence (`evidence`) of `goal`, `rate`, `tok_s_gpu` or
        `ttft_p99` (runs lacking it left out)."""
        values = [v for v in (_figure(run, pick) for run in evidence(self.runs)) if v is not None]
        return sum(values) / len(values) if values else None


def retriable(row: Row) -> bool:
    """Whether `--verify` may verify the row again: inconclusive (or, from a study of an
    earlier version, rejected as within noise)."""
    return row.status is Status.INCONCLUSIVE or (
        row.status is Status.REJECTED and "within noise" in (row.reason or "")
    )


def _figure(run: Run, pick: str) -> float | None:
    if pick == "goal":
        return run.goal
    if pick == "rate":
        return run.rate if run.miss is None else None
    if pick == "tok_s_gpu":
        return run.metrics.output_tok_s_per_gpu
    return run.metrics.ttft_ms.p99


class StudyState(Spec):
    """What `denv optimize` keeps of one RELEASE/STAGE study, beside optuna's own storage."""

    release: str
    stage: str
    fleet: str
    goal: Goal
    target: str | None = None  # the latency target, as text
    budget_gpus: int
    study: str  # optuna's study name
    storage: str  # optuna's storage URL, with any password left out
    traffic: str  # where the traffic came from
    traffic_digest: str
    levers: list[str] | None = None  # the levers searched; None: all
    shape: TraceStats  # the shape optimized for (drift is measured from it)
    catalog: list[str] = []  # recipe ids and engine versions for the model, when it started
    base_revision: str | None = None  # the release's commit the study measured
    started: dt.datetime
    finished: dt.datetime | None = None
    state: str = "running"  # running, finished, stopped, failed
    note: str | None = None  # why it finished, stopped or failed
    trials: int = 0
    current: Row
    candidates: list[Row] = Field(default_factory=list)

    @property
    def key(self) -> str:
        return f"{self.release}/{self.stage}"

    def row(self, candidate: str) -> Row | None:
        return next((r for r in self.candidates if r.id == candidate), None)

    def unfinished(self, why: str) -> StudyState:
        """This state with the rows still trialing rejected for `why`: the run ended (or its
        process died) before their trials did."""
        rows = [
            r.model_copy(update={"status": Status.REJECTED, "reason": why})
            if r.status is Status.TRIALING
            else r
            for r in self.candidates
        ]
        return self.model_copy(update={"candidates": rows})

    def with_row(self, row: Row) -> StudyState:
        """This state with `row` added, or replacing the row of the same id in place."""
        rows = list(self.candidates)
        at = next((i for i, r in enumerate(rows) if r.id == row.id), None)
        if at is None:
            rows.append(row)
        else:
            rows[at] = row
        return self.model_copy(update={"candidates": rows})


# -- the table ------------------------------------------------------------------------------

# The goal's column: goodput per GPU (req/s) or $/M output at capacity; TTFT p99 at the
# traffic's own rate. RATE: the capacity found (requests/s that held the target).
GOAL_HEADER: dict[Goal, str] = {
    "throughput": "GOODPUT/GPU",
    "cost": "$/M-OUTPUT",
    "latency": "GOAL TTFT-P99",
}
GOAL_DIGITS: dict[Goal, int] = {"throughput": 2, "cost": 3, "latency": 0}


def headers(goal: Goal) -> tuple[str, ...]:
    return ("CANDIDATE", "CHANGE", GOAL_HEADER[goal], "RATE", "TTFT-P99", "PARITY", "STATUS")


def versus(value: float | None, current: float | None, digits: int = 0) -> str:
    """`812 (+17%)`, `405 (−5%)` or `700 (=)` against the current figure."""
    if value is None:
        return "…"
    text = f"{value:,.{digits}f}"
    if not current:
        return text
    delta = (value - current) / current
    if abs(delta) < SAME:
        return f"{text} (=)"
    sign = "+" if delta > 0 else "−"
    return f"{text} ({sign}{abs(delta) * 100:.0f}%)"


def compared(gain: Gain, digits: int) -> str:
    """A verified (or verification-rejected) row's goal cell: the verification's own
    comparison, as decided — `16.21 (gain +46.9% vs 11.03)` — the figures the status reason
    and the pull request show too (never recomputed from other runs)."""
    return (
        f"{gain.candidate_mean:,.{digits}f} "
        f"(gain {percent(gain.gain)} vs {gain.current_mean:,.{digits}f})"
    )


def status_text(row: Row) -> str:
    if row.status in (Status.REJECTED, Status.INCONCLUSIVE):
        return f"{row.status.value} ({row.reason})" if row.reason else row.status.value
    if row.status is Status.VERIFIED and row.pr is not None:
        return f"verified (PR #{row.pr})"
    return row.status.value


def parity_text(row: Row) -> str:
    if row.parity_passed is None:
        return "…"
    return "pass" if row.parity_passed else "FAIL"


def table(state: StudyState) -> list[tuple[str, ...]]:
    """The rows of the candidates table: the current release first, then the candidates,
    verified first, then by goal figure (best first), then trialing and rejected. Each
    figure is the mean over the row's runs, with its change against the current one; a row
    that was verified shows its verification's comparison in the goal's column instead."""
    digits = GOAL_DIGITS[state.goal]
    now = {pick: state.current.mean(pick) for pick in ("goal", "rate", "ttft_p99")}

    def cells(row: Row, against: dict[str, float | None]) -> tuple[str, str, str]:
        ttft = row.mean("ttft_p99")
        rate = row.mean("rate")
        goal = versus(row.mean("goal"), against["goal"], digits)
        return (
            compared(row.gain, digits) if row.gain is not None else goal,
            versus(rate, against["rate"], 1) + (" req/s" if rate is not None else ""),
            versus(ttft, against["ttft_p99"]) + (" ms" if ttft is not None else ""),
        )

    none: dict[str, float | None] = {"goal": None, "rate": None, "ttft_p99": None}
    rows: list[tuple[str, ...]] = [
        ("current", "(the release as it is)", *cells(state.current, none), "", "baseline")
    ]
    for row in ranked(state):
        rows.append((row.id, row.change, *cells(row, now), parity_text(row), status_text(row)))
    return rows


def ranked(state: StudyState) -> list[Row]:
    order = {Status.VERIFIED: 0, Status.TRIALING: 1, Status.INCONCLUSIVE: 2, Status.REJECTED: 3}
    sign = -1.0 if higher_is_better(state.goal) else 1.0

    def key(row: Row) -> tuple[int, float, str]:
        figure = row.gain.candidate_mean if row.gain is not None else row.mean("goal")
        return (order[row.status], sign * figure if figure is not None else float("inf"), row.id)

    return sorted(state.candidates, key=key)
