"""Adapter: load levels swept against a trial deployment that is already up (trial.py), each
level's figures as a `Result` — for callers that keep several trials up at once (`denv pr
bench` benches the current release and the pull request's side by side, then runs parity
between them). Like `bench_run.run_bench`, the trial's units are checked after each level,
and a level nobody answered is an error. Nothing here prints or writes files.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from reconciler.bench.bench_run import _answered, _prompt_form
from reconciler.bench.results import build_result
from reconciler.bench.run_info import run_info, trial_price
from reconciler.bench.sweep import Mode, Progress, level_label, level_lines, run_sweep
from reconciler.bench.traffic import TraceLine
from reconciler.bench.trial import TrialEndpoint, check_running
from reconciler.catalog.latency import LatencyTarget
from reconciler.fleet.observe import Transports
from reconciler.spec.base import Spec
from reconciler.spec.fleet import Fleet
from reconciler.spec.recipe import Recipe
from reconciler.spec.repo import Repo
from reconciler.spec.result import Result


class Load(Spec):
    """What to send a trial: the traffic, and at which levels."""

    traffic: list[TraceLine]
    workload: str | None = None  # the standard workload the traffic was generated from
    mode: Mode = "concurrency"
    levels: list[float]
    requests: int | None = None  # per level; None: sweep.level_lines' default
    latency: LatencyTarget | None = None


def sweep_trial(
    repo: Repo,
    recipe: Recipe,
    fleet: Fleet,
    endpoint: TrialEndpoint,
    load: Load,
    *,
    transports: Transports,
    at: dt.datetime,
    by: str,
    progress: Progress = lambda *_: None,
) -> list[Result]:
    """One result a level, priced at the fleet's price (else the public offer); DenvError when
    an engine exits or a level gets no answer."""
    hardware = repo.resolve_hardware(fleet.hardware)
    hardware_id = hardware.id if hardware is not None else fleet.hardware
    aliases = {alias: hw.id for hw in repo.hardware.values() for alias in hw.aliases}
    form = _prompt_form(endpoint)
    info = run_info(
        recipe,
        hardware=hardware_id,
        simulated=endpoint.simulated,
        weights=endpoint.weights,
        traffic=load.traffic,
        workload=load.workload,
        price=trial_price(fleet, hardware_id, None, repo.offers, aliases),
        at=at,
        driver=endpoint.probe.driver,
        runtime=endpoint.probe.runtime,
        gpu_names=endpoint.probe.gpu_names,
        prompt=form,
    ).model_copy(update={"by": by})
    results = []
    for level in load.levels:
        [measured] = run_sweep(
            endpoint.url,
            endpoint.model,
            load.traffic,
            [level],
            load.mode,
            gpus=endpoint.gpus,
            prompt=form,
            latency=load.latency,
            requests=load.requests,
            progress=progress,
        )
        check_running(endpoint, fleet, transports)
        _answered(measured, level_label(load.mode, level))
        sent: Sequence[TraceLine] = level_lines(load.traffic, load.mode, level, load.requests)
        results.append(build_result(measured, info, sent))
    return results
