"""The ranking of `denv bench` and one result in full (`bench get`), gathered from a loaded
repository for the CLI and the UI: the catalog's aliases, each simulated result's error band,
the public offers or given prices, and a result's $/M output where it lacks one (`bench
compare`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal

from reconciler.bench.compare import Uncertainty
from reconciler.bench.compare import uncertainty as result_uncertainty
from reconciler.catalog.cost import price_for, usd_per_m_output
from reconciler.catalog.latency import parse_latency_target
from reconciler.catalog.ranking import ErrorBand, RankBy, Ranking, Row, rank
from reconciler.catalog.roofline import result_roofline
from reconciler.errors import UsageError
from reconciler.spec.recipe import AggregatedTopology, describe_topology, total_gpus
from reconciler.spec.repo import Repo
from reconciler.spec.result import Percentiles, Result

Metric = Literal["output_tok_s_per_gpu", "ttft_p50_ms", "tpot_p50_ms"]
FIGURES: tuple[Metric, ...] = ("output_tok_s_per_gpu", "ttft_p50_ms", "tpot_p50_ms")
METRIC_TEXT: dict[Metric, str] = {
    "output_tok_s_per_gpu": "tok/s/GPU",
    "ttft_p50_ms": "TTFT p50",
    "tpot_p50_ms": "TPOT p50",
}

RANK_BY: tuple[RankBy, ...] = ("cost", "throughput", "speed")
# `denv bench`'s columns, and the one each rank orders by (the UI's are the same, in words).
COLUMNS = (
    "#", "MODEL", "GPU", "RECIPE", "TTFT-P99", "TOK/S/USER", "TOK/S", "TOK/S/GPU", "$/M-OUT",
    "SOURCE",
)  # fmt: skip
RANK_COLUMN: dict[RankBy, str] = {
    "cost": "$/M-OUT",
    "throughput": "TOK/S/GPU",
    "speed": "TOK/S/USER",
}


def aliases(repo: Repo) -> tuple[dict[str, str], dict[str, str]]:
    """alias -> catalog id, of the hardware and of the models."""
    hardware = {alias: hw.id for hw in repo.hardware.values() for alias in hw.aliases}
    models = {alias: arch.id for arch in repo.models.values() for alias in arch.aliases}
    return hardware, models


def ranking(
    repo: Repo,
    *,
    workload: str | None = None,
    latency: str | None = None,
    model: str | None = None,
    hardware: str | None = None,
    rank_by: str = "cost",
    prices: Mapping[str, float] | None = None,
) -> Ranking:
    """`denv bench`'s ranking for these filters; UsageError names a bad one (an unknown
    workload or rank, a malformed latency target)."""
    if rank_by not in RANK_BY:
        raise UsageError(f"unknown rank '{rank_by}' (known: {', '.join(RANK_BY)})")
    by: RankBy = rank_by  # narrowed by the check above
    target = parse_latency_target(latency) if latency else None
    hardware_aliases, model_aliases = aliases(repo)
    return rank(
        repo.results,
        profiles=list(repo.workloads.values()),
        offers=repo.offers,
        hardware_aliases=hardware_aliases,
        workload=workload,
        target=target,
        model=model,
        hardware=hardware,
        by=by,
        prices=prices or {},
        model_aliases=model_aliases,
        bands=error_bands(repo, repo.results, by),
    )


SIMULATED_NOTE = (
    "simulated: predicted by denv's performance model, not measured; -A…+B% = its 80% "
    "interval on the rank figure (the measured one falls inside 8 times in 10; denv sim "
    "predict gives the same; docs/simulator.md); * = extrapolated: outside the calibrated "
    "models and engine, or too few points of that hardware"
)


def row_cells(row: Row) -> list[str]:
    """A ranking row's cells after its number, as `denv bench` writes them: model, GPU,
    recipe, TTFT p99, tok/s per user, tok/s, tok/s/GPU, $/M output, source (with a simulated
    one's band): every figure a ranking can be ordered by (RANK_COLUMN)."""
    # No denv recipe: the engine that ran it, e.g. "(sglang 0.5.8 via dynamo)"
    recipe = row.recipe or "(" + row.engine.replace(" (", " via ").rstrip(")") + ")"
    return [
        row.model,
        row.hardware,
        recipe,
        f"{row.ttft_p99_s:.2f}s" if row.ttft_p99_s is not None else "…",
        _figure(row.tok_s_per_user, 1),
        _figure(row.output_tok_s, 0),
        _figure(row.output_tok_s_per_gpu, 1),
        f"${row.usd_per_m_output:.3f}" if row.usd_per_m_output is not None else "…",
        row.source + (f" {row.band.text}" if row.band is not None else ""),
    ]


def _figure(value: float | None, digits: int) -> str:
    return "…" if value is None else f"{value:,.{digits}f}"


def error_bands(repo: Repo, results: list[Result], rank_by: RankBy) -> dict[str, ErrorBand]:
    """Each simulated result's 80% interval on the rank figure (tok/s/GPU, or TPOT p50 for
    speed), from the simulator's interval table (docs/simulator.md, "Errors")."""
    metric: Metric = "tpot_p50_ms" if rank_by == "speed" else "output_tok_s_per_gpu"
    bands = _bands(repo, [r for r in results if r.source.kind == "simulated"], (metric,))
    return {rid: found[metric] for rid, found in bands.items() if metric in found}


def uncertainty(repo: Callable[[], Repo], result: Result) -> Uncertainty:
    """How far the result's figures may be off (bench/compare.py): a simulated one's 80%
    interval on every figure it covers, a measured or published one's run-to-run noise."""
    if result.source.kind != "simulated":
        return result_uncertainty(result)
    found = _bands(repo(), [result], FIGURES).get(result.id, {})
    return result_uncertainty(result, found)


def _bands(
    repo: Repo, results: list[Result], metrics: tuple[Metric, ...]
) -> dict[str, dict[str, ErrorBand]]:
    """The interval `denv sim predict` gives each result's recipe, hardware, layout and
    load (error_intervals.for_prediction, the one source), in percent of the figure."""
    from reconciler.engines.model.calibration import generation
    from reconciler.engines.model.error_intervals import for_prediction, read_interval_table

    if not results:
        return {}
    table = read_interval_table()
    out: dict[str, dict[str, ErrorBand]] = {}
    for r in results:
        model, hardware = repo.models.get(r.model), repo.resolve_hardware(r.hardware)
        if model is None or hardware is None:
            continue
        mode: Literal["aggregated", "disaggregated"] = (
            "disaggregated"
            if r.topology is not None and not isinstance(r.topology, AggregatedTopology)
            else "aggregated"
        )
        expected = for_prediction(
            table,
            dict.fromkeys(FIGURES, 1.0),  # a unit figure: its interval is the ratio
            hardware.id,
            generation(hardware.id, hardware.vendor),
            model,
            r.engine.name,
            mode,
            r.load.concurrency,
        )
        notes = [n for n in (expected.fallback, *expected.widened) if n]
        basis = "; ".join([f"{expected.cell} ({expected.points} points)", *notes])
        for metric in metrics:
            ratio = getattr(expected, metric)
            out.setdefault(r.id, {})[metric] = ErrorBand(
                lo_pct=round((ratio.lo - 1) * 100, 1),
                hi_pct=round((ratio.hi - 1) * 100, 1),
                metric=METRIC_TEXT[metric],
                basis=basis,
                extrapolated=bool(notes),
            )
    return out


def _percentiles(p: Percentiles) -> dict[str, float | None]:
    return {"p50": p.p50, "p90": p.p90, "p99": p.p99, "mean": p.mean}


def describe(repo: Repo, result: Result, prices: dict[str, float]) -> dict[str, Any]:
    """Everything `bench get` shows, as data."""
    m = result.metrics
    choice = price_for(result, prices, repo.offers, aliases=aliases(repo)[0])
    gpus = result.gpus or (total_gpus(result.topology) if result.topology else None)
    cost = None
    if choice is not None and gpus and m.output_tok_s:
        cost = usd_per_m_output(gpus, choice.gpu_hour, m.output_tok_s)
    recipe = repo.recipes.get(result.recipe.id) if result.recipe.id else None
    return {
        "result": result.id,
        "model": result.model,
        "hardware": result.hardware,
        "precision": result.precision,
        "workload": result.workload.model_dump(exclude_none=True),
        "load": result.load.model_dump(exclude_none=True),
        "speed": {
            "ttft_ms": _percentiles(m.ttft_ms),
            "tpot_ms": _percentiles(m.tpot_ms),
            "itl_ms": _percentiles(m.itl_ms),
            "e2e_ms": _percentiles(m.e2e_ms),
            "tok_s_per_user": 1000 / m.tpot_ms.p50 if m.tpot_ms.p50 else None,
        },
        "throughput": {
            "output_tok_s": m.output_tok_s,
            "output_tok_s_per_gpu": m.output_tok_s_per_gpu,
            "total_tok_s_per_gpu": m.total_tok_s_per_gpu,
            "gpus": gpus,
        },
        "cost": {
            "usd_per_m_output": cost,
            "gpu_hour": choice.gpu_hour if choice else None,
            "price_source": choice.source if choice else None,
            "formula": "GPUs × $/GPU-hour ÷ (output tok/s × 3600) × 10^6",
        },
        "recipe": {
            "id": result.recipe.id,
            "engine": result.engine.model_dump(exclude_none=True),
            "topology": result.topology.model_dump() if result.topology else None,
            "topology_text": describe_topology(result.topology) if result.topology else None,
            "settings": recipe.settings.model_dump(exclude_defaults=True) if recipe else None,
        },
        "roofline": result_roofline(repo, result).model_dump(),
        "source": result.source.model_dump(mode="json", exclude_none=True),
    }


def workload_text(workload: dict[str, Any]) -> str:
    """describe()'s workload in words, e.g. 'chat 1024 in / 1024 out'."""
    text = workload.get("name") or "fixed lengths"
    if workload.get("isl") and workload.get("osl"):
        text += f" {workload['isl']} in / {workload['osl']} out"
    if workload.get("length_range_ratio"):
        text += f" (drawn from {workload['length_range_ratio']:g}–1× of that)"
    if workload.get("dataset"):
        text += f", {workload['dataset']} prompts"
    return text


def load_text(load: dict[str, Any]) -> str:
    """describe()'s load in words, e.g. 'concurrency 64'."""
    if "concurrency" in load:
        return f"concurrency {load['concurrency']}"
    return f"{load['rate']} requests/s" if "rate" in load else "load …"


def flat(values: dict[str, Any], prefix: str = "") -> str:
    """{'kv_cache': {'dtype': 'fp8'}} -> 'kv_cache.dtype fp8'."""
    return ", ".join(
        flat(v, f"{prefix}{k}.") if isinstance(v, dict) else f"{prefix}{k} {v}"
        for k, v in values.items()
    )


def priced(result: Result, prices: dict[str, float], the_repo: Callable[[], Repo]) -> Result:
    """The result with its $/M output: its own, else at the given price or the public offer.
    `the_repo` is asked only when the offers are needed."""
    from reconciler.bench.compare import cost

    if cost(result) is not None and result.hardware not in prices:
        return result
    if not result.gpus or not result.metrics.output_tok_s:
        return result
    loaded = the_repo()
    choice = price_for(result, prices, loaded.offers, aliases=aliases(loaded)[0])
    if choice is None:
        return result
    value = usd_per_m_output(result.gpus, choice.gpu_hour, result.metrics.output_tok_s)
    return result.model_copy(update={"usd_per_m_output": value})
