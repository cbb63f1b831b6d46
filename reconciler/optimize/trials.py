"""Adapter: a candidate on a fleet's trial GPUs — deployed (bench/trial.py: trial GPUs only,
units labelled without release or stage, torn down on exit, Ctrl-C and SIGTERM), the
traffic replayed against it, its figures computed.

A run replays the traffic's requests (their lengths and shared prefix blocks) in closed loop
at the study's concurrency: the same load for every candidate, so throughput per GPU and
latency compare. While it runs, a `stop_early` callback sees the figures so far every few
answers; when it says so the run ends there (it clearly misses the latency target).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
from collections.abc import Callable, Iterator

import aiohttp

from reconciler.bench.loadgen import Target, closed_loop, prompt_format
from reconciler.bench.metrics import LevelMetrics, level_metrics
from reconciler.bench.records import RequestRecord
from reconciler.bench.trial import TrialEndpoint, check_running, new_trial_id, trial_deployment
from reconciler.errors import DenvError
from reconciler.fleet.observe import Transports
from reconciler.optimize.candidates import Run
from reconciler.optimize.goal import goal_value
from reconciler.optimize.workload import Workload, run_miss
from reconciler.spec.fleet import Fleet
from reconciler.spec.recipe import Recipe
from reconciler.spec.repo import Repo
from reconciler.spec.result import Load

Say = Callable[[str], None]
StopEarly = Callable[[Run], bool]
# (requests answered or failed so far, requests in the run)
Progress = Callable[[int, int], None]

CHECK_EVERY = 8  # answers between two looks at the figures so far


@contextlib.contextmanager
def deployed(
    repo: Repo,
    recipe: Recipe,
    fleet: Fleet,
    *,
    transports: Transports,
    weights: str,
    ready_timeout: float,
    say: Say,
) -> Iterator[TrialEndpoint]:
    """`recipe` on free trial GPUs of `fleet` for the `with` block, then torn down."""
    with trial_deployment(
        repo,
        recipe,
        fleet,
        transports=transports,
        trial=new_trial_id(dt.datetime.now(dt.UTC)),
        weights=weights,
        purpose="optimize",
        ready_timeout=ready_timeout,
        say=say,
    ) as endpoint:
        yield endpoint


def run_of(level: LevelMetrics, work: Workload, gpus: int, stopped: bool = False) -> Run:
    metrics = level.metrics
    return Run(
        metrics=metrics,
        goal=goal_value(work.goal, metrics, gpus, work.gpu_hour),
        miss=run_miss(work.target, metrics),
        stopped_early=stopped,
    )


async def _replay(
    endpoint: TrialEndpoint,
    work: Workload,
    stop_early: StopEarly | None,
    progress: Progress,
) -> tuple[list[RequestRecord], bool]:
    target = Target(url=endpoint.url, model=endpoint.model, timeout_s=work.timeout_s)
    target = target.model_copy(update={"prompt": await prompt_format(target)})
    records: list[RequestRecord] = []
    stop = asyncio.Event()
    total = len(work.lines)
    load = Load(concurrency=work.concurrency)

    def seen(record: RequestRecord) -> None:
        records.append(record)
        progress(len(records), total)
        # past the warm-up (one a client), every few answers: is it clearly missing?
        if stop_early is None or len(records) < 2 * work.concurrency:
            return
        if len(records) % CHECK_EVERY == 0:
            so_far = sorted(records, key=lambda r: r.index)
            partial = level_metrics(so_far, load, gpus=endpoint.gpus, target=work.target)
            if stop_early(run_of(partial, work, endpoint.gpus)):
                stop.set()

    loop = asyncio.create_task(closed_loop(target, work.lines, work.concurrency, on_record=seen))
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
    *,
    fleet: Fleet,
    transports: Transports,
    stop_early: StopEarly | None = None,
    progress: Progress = lambda *_: None,
) -> Run:
    """One run of the workload against a trial deployment. DenvError when the endpoint
    cannot be reached or an engine of the trial exited during the run."""
    try:
        records, stopped = asyncio.run(_replay(endpoint, work, stop_early, progress))
    except (aiohttp.ClientError, TimeoutError) as exc:
        why = str(exc) or type(exc).__name__
        raise DenvError(f"{endpoint.url}: cannot reach the trial: {why}") from exc
    check_running(endpoint, fleet, transports)
    load = Load(concurrency=work.concurrency)
    level = level_metrics(records, load, gpus=endpoint.gpus, target=work.target)
    return run_of(level, work, endpoint.gpus, stopped)
