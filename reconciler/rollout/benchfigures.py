"""Pure logic: the bench results a promotion PR shows — for each fleet of the stage it
promotes to, the results of the recipe that stage will run (by recipe digest) on that fleet's
hardware, the newest per load (as `denv bench` picks: latest `source.at`, then greatest id;
ids end with the run's start time)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from reconciler.catalog.roofline import Roofline
from reconciler.forge.views import BenchFigure
from reconciler.spec.result import Load, Result


@dataclass(frozen=True)
class Wanted:
    """One fleet of the next stage: what it will run, on what."""

    fleet: str
    hardware: str  # the hardware id (aliases resolved)
    digest: str  # trials.plan.recipe_digest of the resolved recipe


def load_label(load: Load) -> str:
    if load.concurrency is not None:
        return f"c{load.concurrency}"
    return f"{load.rate:g} req/s" if load.rate is not None else "open loop"


def _recency(result: Result) -> tuple[dt.date, str]:
    return (result.source.at or dt.date.min, result.id)


def _order(load: Load) -> tuple[int, float]:
    return (0, load.concurrency) if load.concurrency is not None else (1, load.rate or 0.0)


def bench_figures(
    results: Iterable[Result],
    wanted: Sequence[Wanted],
    hardware_id: Callable[[str], str],
    roofline: Callable[[Result], Roofline],
) -> list[BenchFigure]:
    """Rows for the promotion body, by fleet then load. `hardware_id` maps a result's
    hardware (maybe an alias) to its id; `roofline` gives a result's roofline."""
    results = list(results)
    rows: list[BenchFigure] = []
    for want in wanted:
        newest: dict[tuple[int | None, float | None], Result] = {}
        for result in results:
            if result.recipe.digest != want.digest or hardware_id(result.hardware) != want.hardware:
                continue
            key = (result.load.concurrency, result.load.rate)
            held = newest.get(key)
            if held is None or _recency(result) > _recency(held):
                newest[key] = result
        for result in sorted(newest.values(), key=lambda r: _order(r.load)):
            metrics, roof = result.metrics, roofline(result)
            rows.append(
                BenchFigure(
                    fleet=want.fleet,
                    hardware=want.hardware,
                    load=load_label(result.load),
                    tok_s_gpu=metrics.output_tok_s_per_gpu,
                    ttft_p99_ms=metrics.ttft_ms.p99,
                    itl_p99_ms=metrics.itl_ms.p99,
                    source=result.source.kind,
                    result_id=result.id,
                    decode_hbm=roof.decode.fraction if roof.decode else None,
                    prefill_compute=roof.prefill.fraction if roof.prefill else None,
                )
            )
    return rows


def none_yet(wanted: Sequence[Wanted]) -> str:
    """What the body says when no result matches."""
    where = ", ".join(f"`{w.fleet}` ({w.hardware})" for w in wanted) or "no fleet"
    digests = sorted({w.digest[:12] for w in wanted})
    recipe = f"recipe digest `{'`, `'.join(digests)}`" if digests else "this recipe"
    return (
        f"none yet: no result in `results/` for {recipe} on {where} "
        "(`denv bench run` records them)."
    )
