"""CLI: how bench sweeps and comparisons look — the levels' table, and two results side by
side (progress while a sweep runs: progress.py)."""

from __future__ import annotations

from collections.abc import Sequence

from rich.table import Table

from reconciler.bench.compare import (
    BETTER_MARK,
    Comparison,
    change_text,
    figure_label,
    figure_text,
    unclear_note,
)
from reconciler.bench.metrics import LevelMetrics
from reconciler.bench.pareto import load_label
from reconciler.cli.common import console, show

LEVEL_COLUMNS = (
    "LOAD",
    "REQ",
    "ERR",
    "TTFT-P50",
    "TTFT-P99",
    "TPOT-P50",
    "ITL-P99",
    "E2E-P99",
    "TOK/S",
    "TOK/S/GPU",
    "GOODPUT",
    "SATURATED",
)


WARMUP_NOTE = "REQ: requests measured; (+N warm-up): sent first, left out of every figure"


def print_levels(levels: Sequence[LevelMetrics], title: str) -> None:
    """One row a level; latencies in ms, goodput in requests/s; REQ says what was sent beyond
    the requests measured (a run of --requests 48 at 16 clients measures 32)."""
    table = Table(*LEVEL_COLUMNS, box=None, title=title, title_justify="left")
    for level in levels:
        m = level.metrics
        table.add_row(
            load_label(level.load),
            show(m.requests) + (f" (+{level.warmup} warm-up)" if level.warmup else ""),
            show(m.errors) + (f" {_kinds(m.errors_by_kind)}" if m.errors else ""),
            show(m.ttft_ms.p50, 1),
            show(m.ttft_ms.p99, 1),
            show(m.tpot_ms.p50, 2),
            show(m.itl_ms.p99, 2),
            show(m.e2e_ms.p99, 1),
            show(m.output_tok_s, 0),
            show(m.output_tok_s_per_gpu, 1),
            show(m.goodput_rps, 2),
            "yes" if level.saturation.saturated else "no",
        )
    console.print(table)
    if any(level.warmup for level in levels):
        console.print(WARMUP_NOTE, markup=False, highlight=False)
    for level in levels:
        if level.saturation.saturated:
            console.print(f"{load_label(level.load)}: {level.saturation.reason}", markup=False)


def _kinds(counts: dict[str, int]) -> str:
    return "(" + ", ".join(f"{k} {n}" for k, n in counts.items()) + ")"


def print_comparison(c: Comparison) -> None:
    setup = Table("", "A", "B", box=None, title="setup", title_justify="left")
    for s in c.settings:
        setup.add_row(s.name, s.a, s.b)
    console.print(f"A: {c.a}\nB: {c.b}", markup=False, highlight=False)
    console.print(setup)
    figures = Table(
        "FIGURE", "A", "B", "B − A", "BETTER", box=None, title="figures", title_justify="left"
    )
    for f in c.figures:
        figures.add_row(
            figure_label(f),
            figure_text(f.a, f.unit),
            figure_text(f.b, f.unit),
            change_text(f),
            BETTER_MARK.get(f.better or "", ""),
        )
    console.print(figures)
    if note := unclear_note(c):
        console.print(note, markup=False, highlight=False, soft_wrap=True)
