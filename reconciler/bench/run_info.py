"""Pure logic: what a `denv bench run` needs besides its deployment — the traffic it sends,
the price it costs the results at and where that price comes from, what each result file
says about the run (RunInfo), and where its chart goes."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence
from pathlib import Path

from reconciler.bench.levels import Mode
from reconciler.bench.results import RunInfo
from reconciler.bench.traffic import TraceLine, trace_digest
from reconciler.catalog.cost import PriceChoice
from reconciler.engines.model.predict import default_requests
from reconciler.errors import UsageError
from reconciler.spec.recipe import Recipe, total_gpus
from reconciler.trials.plan import recipe_digest

OPEN_LOOP_REQUESTS = 100  # a generated workload's length per level in open loop, by default


def sweep_levels(
    traffic: Path | None,
    workload: str | None,
    concurrency: str | None,
    rate: str | None,
    default: str,
) -> tuple[Mode, list[float]]:
    """The load levels of a sweep from its options: closed-loop client counts, or open-loop
    rates; the traffic comes from a file or a standard workload, never both."""
    if traffic is not None and workload is not None:
        raise UsageError("give --traffic or --workload, not both")
    if concurrency is not None and rate is not None:
        raise UsageError("give --concurrency or --rate, not both")
    mode: Mode = "rate" if rate is not None else "concurrency"
    return mode, parse_levels(rate or concurrency or default, f"--{mode}")


def parse_levels(text: str, option: str) -> list[float]:
    """'1,8,32' -> [1.0, 8.0, 32.0]; UsageError naming the bad part."""
    levels = []
    for part in (p.strip() for p in text.split(",")):
        try:
            value = float(part)
        except ValueError:
            raise UsageError(f"{option} '{text}': '{part}' is not a number") from None
        if not value > 0 or value == float("inf"):
            raise UsageError(f"{option} '{text}': {part} is not above zero")
        if option == "--concurrency" and not value.is_integer():
            raise UsageError(f"{option} '{text}': {part} is not a whole number of clients")
        if value in levels:  # one result file a level: the same level twice is one level
            raise UsageError(f"{option} '{text}': {part} is given twice")
        levels.append(value)
    return levels


def workload_requests(mode: Mode, levels: Sequence[float], requests: int | None) -> int:
    """How many lines to generate from a workload: `requests`, else what the largest level
    sends by default (closed loop: a warm-up and ten a client; open loop: 100)."""
    if requests is not None:
        return requests
    if mode == "concurrency":
        return max(default_requests(int(level), None) for level in levels)
    return OPEN_LOOP_REQUESTS


def precision(recipe: Recipe) -> str | None:
    """The weights' precision: the quantization, else the dtype named; None for `auto`."""
    if recipe.settings.quantization != "none":
        return recipe.settings.quantization
    return {"bfloat16": "bf16", "float16": "fp16"}.get(recipe.settings.dtype)


def run_info(
    recipe: Recipe,
    *,
    hardware: str,
    simulated: bool,
    weights: str,
    traffic: Sequence[TraceLine],
    workload: str | None,
    price: PriceChoice | None,
    at: dt.datetime,
    driver: str | None = None,
    runtime: str | None = None,
    gpu_names: Sequence[str] = (),
    prompt: str | None = None,
) -> RunInfo:
    """What every result file of the run says about it. The engine is the recipe's, with
    its version, even on a simulated fleet: the simulator stands in for that engine, and
    `simulated` says so."""
    return RunInfo(
        recipe=recipe.id,
        recipe_digest=recipe_digest(recipe),
        model=recipe.model,
        weights=weights,
        precision=precision(recipe),
        engine=recipe.engine.name,
        engine_version=recipe.engine.version,
        hardware=hardware,
        gpus=total_gpus(recipe.topology),
        topology=recipe.topology,
        simulated=simulated,
        driver=driver,
        runtime=runtime,
        gpu_names=list(gpu_names),
        workload=workload,
        traffic_digest=trace_digest(traffic),
        gpu_hour=price.gpu_hour if price else None,
        price_source=price.source if price else None,
        at=at,
        prompt=prompt,
    )


def chart_stem(root: Path, info: RunInfo) -> Path:
    """`results/<recipe>/<hardware>/<recipe>-<hardware>-<start>-pareto`: beside the run's
    result files (the loader reads only .json and .jsonl there)."""
    slug = re.sub(r"[^a-z0-9.]+", "-", info.recipe.lower()).strip("-")
    stamp = info.at.strftime("%Y%m%dt%H%M%S")
    return root / "results" / info.recipe / info.hardware / f"{slug}-{info.hardware}-{stamp}-pareto"
