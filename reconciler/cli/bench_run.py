"""CLI: `denv bench run` — a recipe on a fleet's trial GPUs, swept at several loads, torn
down; the levels' table, one result file a level, and the throughput-versus-latency chart."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from reconciler.cli.common import JsonOption, RepoOption, console, load, print_json, seconds
from reconciler.errors import NotFound
from reconciler.spec.words import counted

if TYPE_CHECKING:
    from reconciler.bench.bench_run import BenchOutcome, BenchRun
    from reconciler.bench.levels import Mode
    from reconciler.bench.run_plan import LevelPlan
    from reconciler.bench.traffic import TraceLine
    from reconciler.catalog.cost import PriceChoice
    from reconciler.spec.fleet import Fleet
    from reconciler.spec.recipe import Recipe
    from reconciler.spec.repo import Repo

DEFAULT_LEVELS = "1,8,32"

RecipeOption = Annotated[str, typer.Option("--recipe", help="Recipe id, e.g. llama-3.1-8b/vllm@1.")]
TargetOption = Annotated[str, typer.Option("--target", help="Fleet whose trial GPUs to use.")]
TrafficOption = Annotated[
    Path | None, typer.Option("--traffic", help="A Mooncake JSONL trace to replay.")
]
WorkloadOption = Annotated[
    str | None,
    typer.Option("--workload", help="A standard workload to generate (default: chat)."),
]
ConcurrencyOption = Annotated[
    str | None,
    typer.Option(help=f"Closed-loop client counts, e.g. 1,8,32 (default {DEFAULT_LEVELS})."),
]
RateOption = Annotated[str | None, typer.Option(help="Open-loop mean requests/s, e.g. 2,4,8.")]
RequestsOption = Annotated[
    int | None,
    typer.Option(min=1, help="Requests a level (default: a warm-up and ten a client)."),
]
PriceOption = Annotated[
    float | None,
    typer.Option(min=0.0001, help="USD per GPU-hour (default: the fleet's)."),
]
LatencyOption = Annotated[
    str | None, typer.Option(help="Latency target for goodput, e.g. 'p99<1.5s'.")
]
WeightsOption = Annotated[
    str | None,
    typer.Option(
        help="Weights to load (default: a release's pinned ones for this recipe, else "
        "the model's HF repository)."
    ),
]
SeedOption = Annotated[int, typer.Option(help="Seed of the generated workload.")]
ReadyOption = Annotated[str, typer.Option(help="How long the engines may take to become ready.")]
OutOption = Annotated[
    Path | None,
    typer.Option(help="Write results/ under this folder (default: the repository)."),
]


def run(
    recipe: RecipeOption,
    target: TargetOption,
    traffic: TrafficOption = None,
    workload: WorkloadOption = None,
    concurrency: ConcurrencyOption = None,
    rate: RateOption = None,
    requests: RequestsOption = None,
    price: PriceOption = None,
    latency: LatencyOption = None,
    weights: WeightsOption = None,
    seed: SeedOption = 0,
    ready_timeout: ReadyOption = "15m",
    out: OutOption = None,
    repo: RepoOption = Path("."),
    as_json: JsonOption = False,
) -> None:
    """Deploy RECIPE on FLEET's trial GPUs (never GPUs that serve a release), sweep the
    levels in that one deployment, tear it down (also on error, Ctrl-C and SIGTERM), and
    write one result file a level with the chart beside them."""
    # imported here: `denv bench` (the ranking) loads this module too, and must start fast
    from reconciler.bench.bench_run import BenchRun
    from reconciler.bench.run_info import sweep_levels
    from reconciler.bench.run_plan import describe
    from reconciler.catalog.latency import parse_latency_target
    from reconciler.spec.sources import find_root
    from reconciler.trials.deployment import new_trial_id

    mode, levels = sweep_levels(traffic, workload, concurrency, rate, DEFAULT_LEVELS)
    target_latency = parse_latency_target(latency) if latency else None
    timeout = seconds("--ready-timeout", ready_timeout)
    loaded = load(repo)
    spec, fleet = _recipe_and_fleet(loaded, recipe, target)
    if traffic is None:
        workload = workload or "chat"
    lines = _traffic(loaded, traffic, workload, mode, levels, requests, seed)
    planned = [] if requests is not None else _planned(loaded, spec, fleet, lines, mode, levels)
    at = dt.datetime.now(dt.UTC).replace(microsecond=0)
    job = BenchRun(
        recipe=spec,
        fleet=fleet,
        trial=new_trial_id(at),
        at=at,
        traffic=lines,
        workload=workload,
        mode=mode,
        levels=levels,
        requests=requests,
        level_requests={p.level: p.requests for p in planned if p.cut},
        latency=target_latency,
        price=_price(loaded, fleet, price),
        weights=weights,
        ready_timeout=timeout,
    )
    cut = describe(planned, mode)
    outcome = _run(loaded, job, out if out is not None else find_root(repo), cut)
    if as_json:
        print_json(outcome)
        return
    _print_outcome(outcome, job)
    if cut:
        console.print(cut[-1], markup=False, highlight=False, soft_wrap=True)


def _recipe_and_fleet(loaded: Repo, recipe: str, target: str) -> tuple[Recipe, Fleet]:
    spec = loaded.recipes.get(recipe)
    if spec is None:
        raise NotFound(
            f"no recipe '{recipe}' in {loaded.label} (an id is a path under recipes/, "
            "e.g. llama-3.1-8b/vllm@1)"
        )
    fleet = loaded.fleets.get(target)
    if fleet is None:
        raise NotFound(f"unknown fleet '{target}' (known: {', '.join(sorted(loaded.fleets))})")
    return spec, fleet


def _planned(
    loaded: Repo,
    spec: Recipe,
    fleet: Fleet,
    lines: list[TraceLine],
    mode: Mode,
    levels: list[float],
) -> list[LevelPlan]:
    """Each level's requests, cut where the simulator says it would outlast its budget."""
    from reconciler.bench.run_plan import plan_levels, simulated

    hardware = loaded.resolve_hardware(fleet.hardware)
    predict = simulated(spec, hardware, loaded.models.get(spec.model))
    return plan_levels(lines, mode, levels, predict)


def _price(loaded: Repo, fleet: Fleet, given: float | None) -> PriceChoice | None:
    from reconciler.catalog.cost import fleet_price

    return fleet_price(loaded, fleet, given)


def _run(loaded: Repo, job: BenchRun, root: Path, cut: list[str]) -> BenchOutcome:
    """The sweep, with its progress; the levels the budget cut said first."""
    from reconciler.bench.bench_run import run_bench
    from reconciler.cli.progress import ProgressSink
    from reconciler.fleet.drivers.registry import Drivers

    with ProgressSink(numbered=("level", len(job.levels)), unit="requests") as shown:
        for line in cut:
            shown.say(line)
        drivers = Drivers(warn=lambda m: shown.say(f"warning: {m}"))
        try:
            return run_bench(
                loaded, job, out=root, drivers=drivers, say=shown.say, progress=shown.update
            )
        finally:
            drivers.close()


def _traffic(
    repo: Repo,
    path: Path | None,
    workload: str | None,
    mode: Mode,
    levels: list[float],
    requests: int | None,
    seed: int,
) -> list[TraceLine]:
    from reconciler.bench.run_info import workload_requests
    from reconciler.bench.traffic import generate, read_trace

    if path is not None:
        return read_trace(path)
    assert workload is not None
    count = workload_requests(mode, levels, requests)
    # open loop rescales the trace's arrivals to each level: any rate gives them a shape
    arrivals = levels[0] if mode == "rate" else None
    return generate(workload, count, seed, arrivals, profiles=repo.workloads)


def _print_outcome(outcome: BenchOutcome, job: BenchRun) -> None:
    from reconciler.cli.bench_view import print_levels

    trial = outcome.trial
    kind = "simulated" if trial.simulated else "measured"
    sent = f"workload {job.workload}" if job.workload else "traffic file"
    title = f"{job.recipe.id} on {job.fleet.name} ({counted(trial.gpus, 'GPU')}, {kind}), {sent}"
    print_levels(outcome.levels, title)
    price = job.price
    console.print(
        f"price: ${price.gpu_hour:g}/GPU-hour ({price.source})" if price else "price: none",
        markup=False,
        highlight=False,
    )
    console.print("results:", markup=False)
    for path in outcome.results:
        console.print(f"  {path}", markup=False, highlight=False, soft_wrap=True)
    if outcome.chart_png:
        console.print(f"chart: {outcome.chart_png}", markup=False, highlight=False)
    if outcome.chart_mermaid and outcome.mermaid:
        console.print(f"mermaid: {outcome.chart_mermaid}", markup=False, highlight=False)
        console.print(outcome.mermaid, markup=False, highlight=False, soft_wrap=True)
