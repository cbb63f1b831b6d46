"""Adapter: load levels swept against a trial deployment that is already up (trials/), one
level at a time — the one sweep loop of `denv bench run` (bench_run.py: one trial) and `denv
pr bench` (two trials up side by side, then parity between them). Each level is handed over
as its figures and its `Result` as soon as it ends, so that a caller may write its file
before the next level starts. After each level the trial's units are checked: an engine that
exited, or a level nobody answered, ends the sweep with DenvError (the levels before it were
handed over). Nothing here prints or writes files.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple

from reconciler.adapters.endpoint import UNREACHABLE
from reconciler.bench.levels import Mode, level_label, level_lines
from reconciler.bench.loadgen import Target, prompt_format
from reconciler.bench.metrics import LevelMetrics
from reconciler.bench.prompts import PromptFormat
from reconciler.bench.results import RunInfo, build_result
from reconciler.bench.run_info import run_info
from reconciler.bench.sweep import Progress, run_sweep
from reconciler.bench.traffic import TraceLine
from reconciler.catalog.cost import PriceChoice
from reconciler.catalog.latency import LatencyTarget
from reconciler.errors import DenvError
from reconciler.fleet.drivers.registry import Drivers
from reconciler.spec.base import Spec
from reconciler.spec.fleet import Fleet
from reconciler.spec.recipe import Recipe
from reconciler.spec.repo import Repo
from reconciler.spec.result import Result
from reconciler.trials.deployment import TrialEndpoint, check_running


class Load(Spec):
    """What to send a trial: the traffic, and at which levels."""

    traffic: list[TraceLine]
    workload: str | None = None  # the standard workload the traffic was generated from
    mode: Mode = "concurrency"
    levels: list[float]
    requests: int | None = None  # per level; None: sweep.level_lines' default
    level_requests: dict[float, int] = {}  # where a level sends another count (run_plan.py)
    latency: LatencyTarget | None = None  # goodput's target


class SweptLevel(NamedTuple):
    figures: LevelMetrics
    result: Result


def _prompt_form(endpoint: TrialEndpoint) -> PromptFormat:
    """Token ids where the endpoint takes them, else text (sglang-router): asked once."""
    try:
        return asyncio.run(prompt_format(Target(url=endpoint.url, model=endpoint.model)))
    except UNREACHABLE as exc:
        why = str(exc) or type(exc).__name__
        raise DenvError(f"{endpoint.url}: cannot reach the trial's endpoint: {why}") from exc


def _answered(level: LevelMetrics, label: str) -> None:
    """DenvError when no request of the level was answered, with the errors by kind."""
    if not level.metrics.requests:
        kinds = ", ".join(f"{k} {n}" for k, n in level.metrics.errors_by_kind.items())
        raise DenvError(f"{label}: no request was answered ({kinds or 'nothing measured'})")


def _hardware_id(repo: Repo, fleet: Fleet) -> str:
    """The catalog id of the fleet's hardware (an alias resolved), else as the fleet names it."""
    hardware = repo.resolve_hardware(fleet.hardware)
    return hardware.id if hardware is not None else fleet.hardware


@dataclass(frozen=True)
class TrialSweep:
    """A trial ready to sweep: what each result will say about the run, and the prompt
    form its endpoint takes."""

    endpoint: TrialEndpoint
    fleet: Fleet
    load: Load
    info: RunInfo
    form: PromptFormat

    def levels(
        self, drivers: Drivers, progress: Progress = lambda *_: None
    ) -> Iterator[SweptLevel]:
        """Each level in turn, handed over when it ends; DenvError when an engine exits or
        a level gets no answer."""
        endpoint, load = self.endpoint, self.load
        for level in load.levels:
            requests = load.level_requests.get(level, load.requests)
            [measured] = run_sweep(
                endpoint.url,
                endpoint.model,
                load.traffic,
                [level],
                load.mode,
                gpus=endpoint.gpus,
                prompt=self.form,
                latency=load.latency,
                requests=requests,
                progress=progress,
            )
            check_running(endpoint, self.fleet, drivers)
            _answered(measured, level_label(load.mode, level))
            sent = level_lines(load.traffic, load.mode, level, requests)
            yield SweptLevel(measured, build_result(measured, self.info, sent))


def sweep_trial(
    repo: Repo,
    recipe: Recipe,
    fleet: Fleet,
    endpoint: TrialEndpoint,
    load: Load,
    *,
    price: PriceChoice | None,
    at: dt.datetime,
    by: str = "denv bench run",
) -> TrialSweep:
    """The sweep of `recipe`'s trial at `endpoint`, its results priced at `price` and stamped
    with `at` and `by`; asks the endpoint once which prompt form it takes."""
    form = _prompt_form(endpoint)
    info = run_info(
        recipe,
        hardware=_hardware_id(repo, fleet),
        simulated=endpoint.simulated,
        weights=endpoint.weights,
        traffic=load.traffic,
        workload=load.workload,
        price=price,
        at=at,
        driver=endpoint.probe.driver,
        runtime=endpoint.probe.runtime,
        gpu_names=endpoint.probe.gpu_names,
        prompt=form,
    ).model_copy(update={"by": by})
    return TrialSweep(endpoint, fleet, load, info, form)
