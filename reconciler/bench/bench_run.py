"""Adapter: `denv bench run` as a service — a recipe deployed on a fleet's trial GPUs
(trial.py), every load level swept against that one deployment (sweep.py), one result file
per level as soon as the level ends (results.py), the throughput-versus-latency chart beside
them (pareto.py), and the deployment torn down whatever happens. Messages and progress are
callbacks; nothing here prints.

Between levels the trial's units are checked: a level during which an engine exited, or one
that got no answer at all, ends the run with an error (after the teardown); the levels done
before it keep their files.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Callable
from pathlib import Path

import aiohttp

from reconciler.bench.loadgen import Target, prompt_format
from reconciler.bench.metrics import LevelMetrics
from reconciler.bench.pareto import mermaid, points_of_levels, write_png
from reconciler.bench.prompts import PromptFormat
from reconciler.bench.results import build_result, write_result
from reconciler.bench.run_info import chart_stem, run_info
from reconciler.bench.sweep import Mode, Progress, level_label, level_lines, run_sweep
from reconciler.bench.traffic import TraceLine
from reconciler.bench.trial import TrialEndpoint, check_running, trial_deployment
from reconciler.catalog.cost import PriceChoice
from reconciler.catalog.latency import LatencyTarget
from reconciler.errors import DenvError, NotFound
from reconciler.fleet.observe import Transports
from reconciler.spec.base import Spec
from reconciler.spec.fleet import Fleet
from reconciler.spec.recipe import Recipe
from reconciler.spec.repo import Repo


class BenchRun(Spec):
    """What to run: the recipe, where, what to send and at which loads."""

    recipe: Recipe
    fleet: Fleet
    trial: str  # trial.new_trial_id
    at: dt.datetime  # when the run starts (UTC): results are stamped with it
    traffic: list[TraceLine]
    workload: str | None = None  # the standard workload the traffic was generated from
    mode: Mode = "concurrency"
    levels: list[float]
    requests: int | None = None  # per level; None: sweep.level_lines' default
    latency: LatencyTarget | None = None  # goodput's target
    price: PriceChoice | None = None
    weights: str | None = None  # default: the catalog model's Hugging Face repository
    ready_timeout: float = 900.0


class BenchOutcome(Spec):
    trial: TrialEndpoint
    levels: list[LevelMetrics]
    results: list[str]  # the result files written, one a level
    chart_png: str | None = None
    chart_mermaid: str | None = None  # a markdown file holding the mermaid block
    mermaid: str | None = None


def _prompt_form(endpoint: TrialEndpoint) -> PromptFormat:
    """Token ids where the endpoint takes them, else text (sglang-router): asked once."""
    try:
        return asyncio.run(prompt_format(Target(url=endpoint.url, model=endpoint.model)))
    except (aiohttp.ClientError, TimeoutError) as exc:
        why = str(exc) or type(exc).__name__
        raise DenvError(f"{endpoint.url}: cannot reach the trial's endpoint: {why}") from exc


def _answered(level: LevelMetrics, label: str) -> None:
    if not level.metrics.requests:
        kinds = ", ".join(f"{k} {n}" for k, n in level.metrics.errors_by_kind.items())
        raise DenvError(f"{label}: no request was answered ({kinds or 'nothing measured'})")


def run_bench(
    repo: Repo,
    run: BenchRun,
    *,
    out: Path,
    transports: Transports,
    say: Callable[[str], None] = lambda _message: None,
    progress: Progress = lambda *_: None,
) -> BenchOutcome:
    """Deploy, sweep every level, write a result file per level under `out`/results/, draw
    the chart, tear down. DenvError (after the teardown) when a step fails."""
    hardware = repo.resolve_hardware(run.fleet.hardware)
    if hardware is None:
        raise NotFound(f"fleet {run.fleet.name}: unknown hardware '{run.fleet.hardware}'")
    levels: list[LevelMetrics] = []
    written: list[str] = []
    with trial_deployment(
        repo,
        run.recipe,
        run.fleet,
        transports=transports,
        trial=run.trial,
        weights=run.weights,
        ready_timeout=run.ready_timeout,
        say=say,
    ) as endpoint:
        say(f"trial {endpoint.trial} ready in {endpoint.ready_s:.1f}s at {endpoint.url}")
        form = _prompt_form(endpoint)
        info = run_info(
            run.recipe,
            hardware=hardware.id,
            simulated=endpoint.simulated,
            weights=endpoint.weights,
            traffic=run.traffic,
            workload=run.workload,
            price=run.price,
            at=run.at,
            driver=endpoint.probe.driver,
            runtime=endpoint.probe.runtime,
            gpu_names=endpoint.probe.gpu_names,
            prompt=form,
        )
        for level in run.levels:
            label = level_label(run.mode, level)
            [measured] = run_sweep(
                endpoint.url,
                endpoint.model,
                run.traffic,
                [level],
                run.mode,
                gpus=endpoint.gpus,
                prompt=form,
                latency=run.latency,
                requests=run.requests,
                progress=progress,
            )
            check_running(endpoint, run.fleet, transports)
            _answered(measured, label)
            sent = level_lines(run.traffic, run.mode, level, run.requests)
            written.append(str(write_result(out, build_result(measured, info, sent))))
            levels.append(measured)
    outcome = BenchOutcome(trial=endpoint, levels=levels, results=written)
    points = points_of_levels(levels)
    if not points:
        return outcome
    stem = chart_stem(out, info)
    title = f"{run.recipe.id} on {hardware.id}" + (" (simulated)" if endpoint.simulated else "")
    block = mermaid(points, title)
    stem.parent.mkdir(parents=True, exist_ok=True)
    markdown = stem.parent / f"{stem.name}.md"  # names hold dots: never with_suffix
    markdown.write_text(block + "\n")
    png = write_png(points, stem.parent / f"{stem.name}.png", title)
    return outcome.model_copy(
        update={"chart_png": str(png), "chart_mermaid": str(markdown), "mermaid": block}
    )
