"""Adapter: a candidate on a fleet's trial GPUs — deployed (trials/deployment.py: trial GPUs only,
units labelled without release or stage, torn down on exit, Ctrl-C and SIGTERM), the
traffic replayed against it, its figures computed.

A run replays the traffic's requests (their lengths, shared prefix blocks and arrival
pattern) open loop at a speed: a multiple of the recorded arrival rate. `capacity` searches
the speeds (capacity.py) for the highest one that holds the latency target; its figures are
the candidate's. While a run goes, every few answers the figures so far are compared with
the target: a run that clearly misses it ends there.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
from collections.abc import Callable, Iterator

from reconciler.adapters.endpoint import UNREACHABLE
from reconciler.bench.loadgen import Target, open_loop, prompt_format
from reconciler.bench.metrics import LevelMetrics, level_metrics
from reconciler.bench.records import RequestRecord
from reconciler.bench.saturation import BEHIND
from reconciler.errors import DenvError
from reconciler.fleet.drivers.registry import Drivers
from reconciler.optimize.candidates import Probe, Run
from reconciler.optimize.capacity import Found, Ladder, search
from reconciler.optimize.goal import goal_value, served
from reconciler.optimize.outcome import Outcome, clearly_misses
from reconciler.optimize.workload import Workload, run_miss
from reconciler.spec.fleet import Fleet
from reconciler.spec.recipe import Recipe
from reconciler.spec.repo import Repo
from reconciler.spec.result import Load
from reconciler.trials.deployment import (
    TrialEndpoint,
    check_running,
    new_trial_id,
    trial_deployment,
)

Say = Callable[[str], None]
# (requests answered or failed so far, requests in the run); (0, total) when the run starts
Progress = Callable[[int, int], None]
# (speed, the run) once each run of a search has ended; the run is None when it failed
Ended = Callable[[float, Run | None], None]

CHECK_EVERY = 8  # answers between two looks at the figures so far


@contextlib.contextmanager
def deployed(
    repo: Repo,
    recipe: Recipe,
    fleet: Fleet,
    *,
    drivers: Drivers,
    weights: str,
    ready_timeout: float,
    say: Say,
) -> Iterator[TrialEndpoint]:
    """`recipe` on free trial GPUs of `fleet` for the `with` block, then torn down."""
    with trial_deployment(
        repo,
        recipe,
        fleet,
        drivers=drivers,
        trial=new_trial_id(dt.datetime.now(dt.UTC)),
        weights=weights,
        secrets=None,  # the release's own weights, from the default branch: the fleet's token
        purpose="optimize",
        ready_timeout=ready_timeout,
        say=say,
    ) as endpoint:
        yield endpoint


def run_of(
    level: LevelMetrics, work: Workload, gpus: int, speed: float, stopped: bool = False
) -> Run:
    """One run's figures. Without a latency target every answered request counts as good."""
    metrics = level.metrics
    answered = metrics.requests or 0
    good = answered
    if metrics.goodput_rps is not None:
        good = min(round(metrics.goodput_rps * level.window_s), answered)
    pace = level.saturation
    miss = run_miss(work.target, metrics, pace.arrival_rps, pace.answer_rps)
    client = bool(
        pace.arrival_rps and pace.scheduled_rps and pace.arrival_rps < BEHIND * pace.scheduled_rps
    )
    if client:
        # the load generator fell behind its schedule: this run measured the client. Its own
        # requests' schedule, not the traffic's mean rate: a short run replays a stretch of
        # the traffic that may be sparser than the whole
        miss = (
            f"the load generator sent {pace.arrival_rps:.3g} of the {pace.scheduled_rps:.3g} "
            "requests/s its schedule asked: the machine it runs on cannot offer more"
        )
    at = served(pace.arrival_rps or work.rate(speed), answered + (metrics.errors or 0), good,
                level.output_tokens)  # fmt: skip
    return Run(
        metrics=metrics,
        goal=goal_value(work.goal, metrics, gpus, work.gpu_hour, at),
        miss=miss,
        stopped_early=stopped,
        speed=speed,
        rate=work.rate(speed),
        served=at,
        client_behind=client,
    )


async def _replay(
    target: Target, endpoint: TrialEndpoint, work: Workload, speed: float, progress: Progress
) -> tuple[list[RequestRecord], bool]:
    records: list[RequestRecord] = []
    stop = asyncio.Event()
    lines, at = work.run(speed)
    total = len(lines)
    load = Load(rate=work.rate(speed))
    progress(0, total)  # the run starts now: its duration counts from here

    def seen(record: RequestRecord) -> None:
        records.append(record)
        progress(len(records), total)
        if len(records) % CHECK_EVERY == 0:  # every few answers: is it clearly missing?
            so_far = sorted(records, key=lambda r: r.index)
            partial = level_metrics(so_far, load, gpus=endpoint.gpus, target=work.target)
            outcome = Outcome(metrics=partial.metrics, gpus=endpoint.gpus)
            if clearly_misses(outcome, work.target):
                stop.set()

    loop = asyncio.create_task(open_loop(target, lines, at, on_record=seen))
    stopper = asyncio.create_task(stop.wait())
    done, _ = await asyncio.wait({loop, stopper}, return_when=asyncio.FIRST_COMPLETED)
    stopper.cancel()
    if loop in done:
        return loop.result(), False
    loop.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await loop
    return sorted(records, key=lambda r: r.index), True


def measure(
    endpoint: TrialEndpoint,
    work: Workload,
    speed: float,
    *,
    fleet: Fleet,
    drivers: Drivers,
    progress: Progress = lambda *_: None,
    target: Target | None = None,
    check: bool = True,
) -> Run:
    """One run of the workload at `speed` against a trial deployment. DenvError when the
    endpoint cannot be reached or (`check`) an engine of the trial exited during the run.
    `target`: the endpoint as the load generator sends to it (default: asked of it)."""
    try:
        target = target or _target(endpoint, work)
        records, stopped = asyncio.run(_replay(target, endpoint, work, speed, progress))
    except UNREACHABLE as exc:
        why = str(exc) or type(exc).__name__
        raise DenvError(f"{endpoint.url}: cannot reach the trial: {why}") from exc
    if check:
        check_running(endpoint, fleet, drivers)
    level = level_metrics(records, Load(rate=work.rate(speed)), gpus=endpoint.gpus,
                          target=work.target)  # fmt: skip
    return run_of(level, work, endpoint.gpus, speed, stopped)


def capacity(
    endpoint: TrialEndpoint,
    work: Workload,
    ladder: Ladder,
    *,
    fleet: Fleet,
    drivers: Drivers,
    progress: Callable[[float], Progress] = lambda _speed: lambda *_: None,
    ended: Ended = lambda *_: None,
) -> Run:
    """The capacity search against a trial deployment: the run at the highest speed that
    held the target, with every run tried; the slowest run tried when none held.
    `progress(speed)` gives each run's progress callback; `ended` hears of each run as soon
    as it ends (one stopped early never reaches its total)."""

    try:
        target = _target(endpoint, work)  # once a search: its prompt form does not change
    except UNREACHABLE as exc:
        why = str(exc) or type(exc).__name__
        raise DenvError(f"{endpoint.url}: cannot reach the trial: {why}") from exc

    def probe(speed: float) -> Run:
        run: Run | None = None
        try:
            run = measure(endpoint, work, speed, fleet=fleet, drivers=drivers,
                          progress=progress(speed), target=target, check=False)  # fmt: skip
        finally:
            ended(speed, run)
        return run

    found = search(probe, lambda run: run.miss is None, ladder)
    check_running(endpoint, fleet, drivers)  # an engine that died shows here, once
    return with_tried(found)


def _target(endpoint: TrialEndpoint, work: Workload) -> Target:
    """The trial's endpoint with the prompt form it takes (loadgen.prompt_format)."""
    target = Target(url=endpoint.url, model=endpoint.model, timeout_s=work.timeout_s)
    return target.model_copy(update={"prompt": asyncio.run(prompt_format(target))})


def with_tried(found: Found[Run]) -> Run:
    """The search's answer as one Run, carrying every run it tried."""
    tried = [
        Probe(
            speed=t.speed,
            rate=t.result.rate or 0.0,
            goal=t.result.goal,
            miss=t.result.miss,
            stopped_early=t.result.stopped_early,
        )
        for t in found.tried
    ]
    return found.best.result.model_copy(update={"tried": tried})
