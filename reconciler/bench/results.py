"""Result files of runs of our own: a load level's figures and what was deployed become a
`Result` (pure), written to `results/<recipe-id>/<hardware>/<id>.json` and read back (file
edges: `write_result`, `read_result`)."""

from __future__ import annotations

import datetime as dt
import re
import statistics
from collections.abc import Sequence
from pathlib import Path

from pydantic import Field, PositiveInt, ValidationError

from reconciler.bench.metrics import LevelMetrics
from reconciler.bench.traffic import TraceLine
from reconciler.catalog.cost import usd_per_m_output
from reconciler.errors import DenvError
from reconciler.spec.base import RecipeId, Slug, Spec
from reconciler.spec.bounds import max_bytes
from reconciler.spec.reading import read_text
from reconciler.spec.recipe import Topology
from reconciler.spec.result import (
    Environment,
    Load,
    Result,
    ResultEngine,
    ResultRecipe,
    Source,
    UsedPrice,
    Workload,
)


class RunInfo(Spec):
    """What was deployed and sent, as `bench run` knows it."""

    recipe: RecipeId
    recipe_digest: str
    model: Slug
    weights: str | None = None
    precision: str | None = None
    engine: str
    engine_version: str
    hardware: Slug
    gpus: PositiveInt  # every GPU of the deployment, prefill included
    topology: Topology | None = None
    simulated: bool  # on simulated GPUs: the result says `simulated`, never `measured`
    driver: str | None = None
    runtime: str | None = None  # CUDA or ROCm version
    gpu_names: list[str] = []
    workload: str | None = None  # the standard workload the traffic was drawn from
    traffic_digest: str  # traffic.trace_digest of what was sent
    gpu_hour: float | None = Field(default=None, gt=0)  # the price used, USD per GPU-hour
    price_source: str | None = None  # where that price comes from
    at: dt.datetime  # when the run started (UTC)
    by: str = "denv bench run"
    prompt: str | None = None  # the prompt form sent (token_ids or text)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9.]+", "-", text.lower()).strip("-")


def _load_tag(load: Load) -> str:
    if load.concurrency is not None:
        return f"c{load.concurrency}"
    return f"r{load.rate:g}" if load.rate is not None else "open"


def result_id(run: RunInfo, load: Load) -> str:
    """e.g. `llama-3.1-8b-vllm-1-h200-c8-20261201t120000`: recipe, hardware, load, start."""
    stamp = run.at.strftime("%Y%m%dt%H%M%S")
    return f"{_slug(run.recipe)}-{run.hardware}-{_load_tag(load)}-{stamp}"[:128]


def _nominal(lines: Sequence[TraceLine]) -> tuple[int | None, int | None]:
    if not lines:
        return None, None
    return (
        round(statistics.fmean(line.input_length for line in lines)),
        round(statistics.fmean(line.output_length for line in lines)),
    )


def _notes(level: LevelMetrics, run: RunInfo) -> str:
    parts = [
        f"{level.metrics.requests or 0} answers measured of {level.sent} sent "
        f"(first {level.warmup} left out as warm-up), window {level.window_s:.3f} s",
    ]
    if run.prompt:
        parts.append(f"{run.prompt} prompts")
    if level.short_outputs:
        parts.append(f"{level.short_outputs} answers shorter than asked (ignore_eos unheard?)")
    if level.saturation.saturated:
        parts.append(f"saturated: {level.saturation.reason}")
    return "; ".join(parts)


def build_result(level: LevelMetrics, run: RunInfo, lines: Sequence[TraceLine] = ()) -> Result:
    """One level as a result file's model. With `run.workload`, the lines' mean lengths are
    its nominal lengths (so `denv bench --workload` matches it); a traffic file is known by
    its digest only."""
    isl, osl = _nominal(lines) if run.workload else (None, None)
    price = None
    cost = None
    if run.gpu_hour is not None:
        price = UsedPrice(gpu_hour=run.gpu_hour, source=run.price_source or "given")
        if level.metrics.output_tok_s:
            cost = round(usd_per_m_output(run.gpus, run.gpu_hour, level.metrics.output_tok_s), 4)
    return Result(
        id=result_id(run, level.load),
        model=run.model,
        weights=run.weights,
        precision=run.precision,
        recipe=ResultRecipe(id=run.recipe, digest=run.recipe_digest),
        engine=ResultEngine(name=run.engine, version=run.engine_version),
        hardware=run.hardware,
        gpus=run.gpus,
        topology=run.topology,
        workload=Workload(name=run.workload, isl=isl, osl=osl, traffic_digest=run.traffic_digest),
        load=level.load,
        metrics=level.metrics,
        price=price,
        usd_per_m_output=cost,
        source=Source(
            kind="simulated" if run.simulated else "measured",
            at=run.at.date(),
            by=run.by,
            notes=_notes(level, run),
        ),
        environment=Environment(
            driver=run.driver, runtime=run.runtime, gpu_names=list(run.gpu_names)
        ),
    )


def result_path(root: Path, result: Result) -> Path:
    """`results/<recipe-id>/<hardware>/<id>.json` under the repository root."""
    recipe = result.recipe.id or result.model
    return root / "results" / recipe / result.hardware / f"{result.id}.json"


def write_result(root: Path, result: Result) -> Path:
    """The result as indented JSON, written whole (temporary file, then renamed)."""
    path = result_path(root, result)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(result.model_dump_json(indent=2, exclude_none=True) + "\n")
    partial.replace(path)
    return path


def read_result(path: Path) -> Result:
    """One result file, or DenvError naming the file and what is wrong."""
    text = read_text(path, "result file", max_bytes(str(path)))  # measured before it is read
    try:
        return Result.model_validate_json(text)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'file'}: {e['msg']}" for e in exc.errors()
        )
        raise DenvError(f"{path}: not a valid result: {problems}") from exc
