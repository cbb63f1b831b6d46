"""Adapter: `denv bench run` as a service — a recipe deployed on a fleet's trial GPUs
(trials/), every load level swept against that one deployment (sweep.py), one result file
per level as soon as the level ends (results.py), the throughput-versus-latency chart beside
them (pareto.py), and the deployment torn down whatever happens. Messages and progress are
callbacks; nothing here prints.

Between levels the trial's units are checked: a level during which an engine exited, or one
that got no answer at all, ends the run with an error (after the teardown); the levels done
before it keep their files.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path

from reconciler.bench.metrics import LevelMetrics
from reconciler.bench.pareto import mermaid, points_of_levels, write_png
from reconciler.bench.results import write_result
from reconciler.bench.run_info import chart_stem
from reconciler.bench.sweep import Progress
from reconciler.bench.trial_sweep import Load, sweep_trial
from reconciler.catalog.cost import PriceChoice
from reconciler.errors import NotFound
from reconciler.fleet.drivers.registry import Drivers
from reconciler.spec.base import Spec
from reconciler.spec.fleet import Fleet
from reconciler.spec.recipe import Recipe
from reconciler.spec.repo import Repo
from reconciler.trials.deployment import TrialEndpoint, trial_deployment


class BenchRun(Load):
    """What to run: the recipe, where, and (as a `Load`) what to send and at which loads."""

    recipe: Recipe
    fleet: Fleet
    trial: str  # trial.new_trial_id
    at: dt.datetime  # when the run starts (UTC): results are stamped with it
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


def run_bench(
    repo: Repo,
    run: BenchRun,
    *,
    out: Path,
    drivers: Drivers,
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
        drivers=drivers,
        trial=run.trial,
        weights=run.weights,
        secrets=None,  # the operator's own run: the fleet's token
        ready_timeout=run.ready_timeout,
        say=say,
    ) as endpoint:
        say(f"trial {endpoint.trial} ready in {endpoint.ready_s:.1f}s at {endpoint.url}")
        sweep = sweep_trial(repo, run.recipe, run.fleet, endpoint, run, price=run.price, at=run.at)
        for swept in sweep.levels(drivers, progress):
            written.append(str(write_result(out, swept.result)))
            levels.append(swept.figures)
    outcome = BenchOutcome(trial=endpoint, levels=levels, results=written)
    points = points_of_levels(levels)
    if not points:
        return outcome
    stem = chart_stem(out, sweep.info)
    title = f"{run.recipe.id} on {hardware.id}" + (" (simulated)" if endpoint.simulated else "")
    block = mermaid(points, title)
    stem.parent.mkdir(parents=True, exist_ok=True)
    markdown = stem.parent / f"{stem.name}.md"  # names hold dots: never with_suffix
    markdown.write_text(block + "\n")
    png = write_png(points, stem.parent / f"{stem.name}.png", title)
    return outcome.model_copy(
        update={"chart_png": str(png), "chart_mermaid": str(markdown), "mermaid": block}
    )
