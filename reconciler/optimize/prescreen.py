"""Pure logic (CPU only): the pre-screen — each candidate's figures on the traffic as the
simulator's performance model predicts them (`denv sim predict`, virtual time), ranked by the
goal with the latency target as a constraint. The prediction runs the same capacity search
as a trial (capacity.py: the traffic open loop at its own arrival pattern, time-scaled), so
it predicts the same figure: goodput per GPU, or $/M output, at the highest rate that holds
the target. Predictions are labelled simulated; they choose what to trial first, and never
stand in for a measurement."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from reconciler.catalog.latency import LatencyTarget
from reconciler.engines.model.predict import predict
from reconciler.engines.model.traffic import Request, traced
from reconciler.errors import DenvError
from reconciler.optimize.capacity import AT_RECORDED_RATE, Found, Ladder, rounded, search
from reconciler.optimize.goal import Goal, higher_is_better, searches_capacity
from reconciler.optimize.outcome import Outcome, violation
from reconciler.optimize.space import Candidate, SearchSpace
from reconciler.optimize.workload import Workload

Progress = Callable[[int, int], None]  # (done, total)

# How far over a latency limit a prediction may lie and still be worth a trial: the model's
# median errors over its calibration points are 8% (tok/s/GPU) to 15% (TTFT p50), see
# docs/simulator.md, "Errors".
MODEL_MARGIN = 0.1
# A predicted run's most requests: a prediction costs about a millisecond of CPU a request,
# and the search makes several a candidate. Runs of the trials may be longer (a fast
# deployment at a high rate): its prediction is then of a shorter run of the same traffic.
PREDICTED_REQUESTS = 120
# The pre-screen's search stops at four grid steps (19%), about the model's own error.
RESOLUTION = 4
# Predictions this close (relative) on the goal and the target are taken as one: the levers
# that tell them apart did not matter to the model.
ALIKE = 0.005


@dataclass(frozen=True)
class Scored:
    """A candidate's predicted outcome and how it reads against the goal and the target."""

    candidate: Candidate
    outcome: Outcome | None  # None: nothing could be predicted (see reason)
    value: float | None  # the goal's figure
    violation: float  # <= 0: meets the latency target
    reason: str | None = None  # why it misses the target, or could not be predicted

    @property
    def meets(self) -> bool:
        return self.value is not None and self.violation <= 0


def prescreen(
    space: SearchSpace,
    candidates: Sequence[Candidate],
    work: Workload,
    *,
    ladder: Ladder | None = None,
    progress: Progress | None = None,
) -> list[Scored]:
    """Predict every candidate on the workload's runs (the traffic open loop, as trials send
    it) and rank them: those meeting the target first, best goal figure first; then the rest,
    nearest the target first. `ladder`: the capacity search's (default: from the current
    release's predicted capacity)."""
    work = predicted_runs(work)
    if ladder is None:
        ladder = start_ladder(space, work)
    scored: list[Scored] = []
    for done, candidate in enumerate(candidates, start=1):
        scored.append(score(space, candidate, work, ladder))
        if progress is not None:
            progress(done, len(candidates))
    return ranked(scored, work.goal)


def predicted_runs(work: Workload) -> Workload:
    """The workload as the pre-screen predicts it: runs of PREDICTED_REQUESTS at most."""
    cap = min(work.max_requests, max(PREDICTED_REQUESTS, work.requests))
    return work.model_copy(update={"max_requests": cap})


def start_ladder(space: SearchSpace, work: Workload) -> Ladder:
    """The search every candidate's prediction runs: from the current release's predicted
    capacity (candidates lie near it, so fewer predictions find theirs), as trials start
    from its measured one."""
    if not searches_capacity(work.goal):
        return AT_RECORDED_RATE
    current = score(space, space.current(), work, Ladder(resolution=RESOLUTION))
    rate = current.outcome.rate if current.outcome is not None else None
    if rate is None or not work.recorded_rps or not current.meets:
        return Ladder(resolution=RESOLUTION)
    return Ladder(start=rate / work.recorded_rps, resolution=RESOLUTION)


def requests_at(work: Workload, speed: float) -> list[Request]:
    """A run's requests at `speed`, each with its send time, as a trial sends them."""
    lines, at = work.run(speed)
    return [replace(r, at_s=t) for r, t in zip(traced(lines), at, strict=True)]


def score(
    space: SearchSpace, candidate: Candidate, work: Workload, ladder: Ladder | None = None
) -> Scored:
    """One candidate's prediction: the capacity search in virtual time."""
    recipe = space.recipe_of(candidate)
    target, goal = work.target, work.goal

    def probe(speed: float) -> Outcome:
        prediction = predict(
            recipe,
            space.hardware,
            space.model,
            requests_at(work, speed),
            rate=work.rate(speed),
            target=target,
        )
        return Outcome.from_prediction(prediction, space.gpu_hour)

    try:
        found: Found[Outcome] = search(
            probe, lambda o: violation(o, target) <= 0, ladder or start_ladder_for(goal)
        )
    except (DenvError, ValueError) as exc:
        return Scored(candidate, None, None, float("inf"), f"not predicted: {exc}")
    return scored(candidate, found.best.result, target, goal)


def scored(
    candidate: Candidate, outcome: Outcome, target: LatencyTarget | None, goal: Goal
) -> Scored:
    """A predicted outcome as it reads against the goal and the target."""
    miss = violation(outcome, target)
    reason = None
    if outcome.metrics.errors:
        reason = f"{outcome.metrics.errors} requests too large for one replica"
    elif outcome.behind and miss > 0:
        at = f" at {rounded(outcome.rate)} req/s" if outcome.rate is not None else ""
        reason = f"a queue builds even{at}"
    elif miss > 0 and target is not None:
        reason = target.judge(outcome.metrics).reason
    return Scored(candidate, outcome, outcome.value(goal), miss, reason)


def start_ladder_for(goal: Goal) -> Ladder:
    return Ladder(resolution=RESOLUTION) if searches_capacity(goal) else AT_RECORDED_RATE


def ranked(scored: Sequence[Scored], goal: Goal) -> list[Scored]:
    sign = -1.0 if higher_is_better(goal) else 1.0

    def key(s: Scored) -> tuple[int, float, str]:
        if s.meets and s.value is not None:
            return (0, sign * s.value, s.candidate.id)
        return (1, s.violation, s.candidate.id)

    return sorted(scored, key=key)


def promising(scored: Sequence[Scored], goal: Goal, margin: float = MODEL_MARGIN) -> list[Scored]:
    """What to trial first: predictions within `margin` of the target, best goal figure first,
    one of each group of alike predictions (the first of it in `scored`'s order)."""
    near = [s for s in scored if s.value is not None and s.violation <= margin]
    sign = -1.0 if higher_is_better(goal) else 1.0
    near.sort(key=lambda s: (sign * (s.value or 0.0), s.candidate.id))
    picked: list[Scored] = []
    for s in near:
        if not any(_alike(s, p) for p in picked):
            picked.append(s)
    return picked


def _alike(a: Scored, b: Scored) -> bool:
    if a.value is None or b.value is None:
        return False
    close = abs(a.value - b.value) <= ALIKE * max(abs(a.value), abs(b.value), 1e-9)
    return close and abs(a.violation - b.violation) <= ALIKE
