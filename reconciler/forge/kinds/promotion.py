"""Pure logic: a promotion's pull request (`<!-- denv:promotion -->`,
templates/promotion.md) from a `PromotionView`: the bake, its alarms, parity and bench."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC

from reconciler.catalog.roofline import percent as roofline_percent
from reconciler.forge.render import Fill, number, short, table
from reconciler.forge.views import AlarmRow, BenchFigure, PromotionView


def _alarm_table(rows: Sequence[AlarmRow]) -> str:
    if not rows:
        return "No alarms are set for this stage."
    lines = [(r.name, r.observed, r.limit, _verdict(r)) for r in rows]
    return table(("alarm", "observed", "limit", "verdict"), lines)


def _verdict(row: AlarmRow) -> str:
    if not row.judged:
        return "not judged"
    return "ok" if row.ok else "FIRING"


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{number(value)} ms"


def _bench_figures(rows: Sequence[BenchFigure], none: str) -> str:
    if not rows:
        return none
    lines = [
        (
            f"`{r.fleet}`",
            r.hardware,
            r.load,
            "—" if r.tok_s_gpu is None else number(r.tok_s_gpu),
            _ms(r.ttft_p99_ms),
            _ms(r.itl_p99_ms),
            _share(r.decode_hbm),
            _share(r.prefill_compute),
            r.source,
            f"`{r.result_id}`",
        )
        for r in rows
    ]
    headers = (
        "fleet",
        "hardware",
        "load",
        "tok/s/GPU",
        "TTFT p99",
        "ITL p99",
        "decode HBM",
        "prefill compute",
        "source",
        "result",
    )
    intro = (
        "the newest result per fleet and load of the recipe this revision runs, with the "
        "share of HBM bandwidth and compute its figures imply (docs/benchmarks.md, Roofline):"
    )
    return intro + "\n\n" + table(headers, lines, right=(3, 4, 5, 6, 7))


def _share(value: float | None) -> str:
    return "—" if value is None else roofline_percent(value)


def render(view: PromotionView, fill: Fill) -> str:
    stamp = "%Y-%m-%d %H:%M:%S UTC"
    return fill(
        release=view.release,
        revision=short(view.revision),
        from_stage=view.from_stage,
        to_stage=view.to_stage,
        fleets=", ".join(f"`{f}`" for f in view.fleets),
        bake=view.bake,
        baked_from=view.baked_from.astimezone(UTC).strftime(stamp),
        baked_until=view.baked_until.astimezone(UTC).strftime(stamp),
        alarms=_alarm_table(view.alarms),
        parity=view.parity,
        bench=_bench_figures(view.bench, view.bench_none),
        approvals=view.approvals,
    )
