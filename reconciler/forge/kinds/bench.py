"""Pure logic: the bench comment (`<!-- denv:bench -->`, templates/bench.md) from a
`BenchView`: each subject's figures beside the current release's, with their changes, and
the Pareto chart."""

from __future__ import annotations

import re
from collections.abc import Sequence

from reconciler.forge.render import Fill, number, percent, quoted, short, table
from reconciler.forge.views import BenchFailure, BenchRow, BenchView, MetricDelta, ParetoPoint

SAME = 0.005  # a change under half a percent reads as "same": runs vary more than that


def change(metric: MetricDelta) -> str:
    if metric.current is None or metric.current == 0:
        return "new"
    delta = (metric.candidate - metric.current) / metric.current
    if abs(delta) < SAME:
        return f"{percent(delta)} (same)"
    better = (delta > 0) == metric.higher_is_better
    return f"{percent(delta)} ({'better' if better else 'worse'})"


def _bench_table(row: BenchRow) -> str:
    where = f"{row.hardware}, simulated" if row.simulated else row.hardware
    head = f"#### `{row.subject}` on `{row.fleet}` ({where})"
    if row.result_id:
        head += f", result `{row.result_id}`"
    rows = [
        (
            f"{m.name} ({m.unit})",
            "…" if m.current is None else number(m.current),
            number(m.candidate),
            change(m),
        )
        for m in row.metrics
    ]
    body = table(("metric", "current release", "this PR", "change"), rows, right=(1, 2, 3))
    roofline = f"\n\nRoofline of this PR's result: {row.roofline}" if row.roofline else ""
    return f"{head}\n\n{body}{roofline}"


def _point_name(point: ParetoPoint) -> str:
    # mermaid's quadrant grammar takes letters, digits, spaces and '-' in names
    return re.sub(r"[^A-Za-z0-9 -]+", " ", f"{point.series} {point.label}").strip()


def _scale(value: float, top: float) -> str:
    return f"{min(max(value / top, 0.0), 0.999):.3f}" if top > 0 else "0"


def pareto_chart(points: Sequence[ParetoPoint]) -> str:
    """Throughput per GPU against interactivity as a mermaid quadrant chart (axes 0..1, so
    scaled to 110% of the largest value, which the caption states)."""
    if not points:
        return ""
    top_x = max(p.interactivity for p in points) * 1.1
    top_y = max(p.throughput for p in points) * 1.1
    lines = [
        "```mermaid",
        "quadrantChart",
        "    title Pareto - throughput per GPU against interactivity",
        "    x-axis slower per user --> faster per user",
        "    y-axis fewer tokens per GPU --> more tokens per GPU",
        *(
            f"    {_point_name(p)}: [{_scale(p.interactivity, top_x)}, "
            f"{_scale(p.throughput, top_y)}]"
            for p in points
        ),
        "```",
    ]
    caption = (
        f"x: output tok/s per user, 0 to {number(top_x)}; "
        f"y: output tok/s per GPU, 0 to {number(top_y)}. Up and right is better."
    )
    return "\n".join(lines) + f"\n\n{caption}"


def _bench_tables(view: BenchView) -> str:
    if view.problems:
        refused = "**Invalid or refused files: nothing benched.**"
        listing = "\n".join(view.problems)
        return f"{refused}\n\n{quoted(listing)}"
    return "\n\n".join(_bench_table(r) for r in view.rows) or "No results."


def _failure(failure: BenchFailure) -> str:
    """A list item: who failed, and what the engines and hosts said, quoted under it."""
    block = quoted(failure.error).replace("\n", "\n  ")
    return f"- **{failure.subject} failed**:\n\n  {block}"


def render(view: BenchView, fill: Fill) -> str:
    simulated = any(r.simulated for r in view.rows)
    return fill(
        head=short(view.head_sha),
        current=f"`{view.current}`",
        traffic=view.traffic,
        simulated=" Figures marked simulated come from denv's simulator, not GPUs."
        if simulated
        else "",
        tables=_bench_tables(view),
        notes="\n".join(
            [*(f"- {' '.join(note.split())}" for note in view.notes), *map(_failure, view.failures)]
        ),
        chart=pareto_chart(view.pareto),
    )
