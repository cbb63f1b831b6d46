"""The explorer's Pareto chart, the InferenceX view: throughput per GPU (y) against
interactivity (x: tok/s per user, 1000 / TPOT p50), one point per ranked result, coloured and
shaped by its source kind, the frontier drawn. Inline SVG, no library: each point is a link to
its result, with a tooltip and a label a screen reader reads, in the keyboard's tab order."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

from reconciler.catalog.ranking import Row

WIDTH, HEIGHT = 760, 420
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 12, 44  # room for the axes' ticks and titles
KINDS = ("published", "measured", "simulated")
SHAPES = {"published": "circle", "measured": "square", "simulated": "triangle"}


@dataclass(frozen=True)
class Point:
    result: str
    x: float  # tok/s per user
    y: float  # output tok/s per GPU
    kind: str  # published, measured, simulated
    label: str  # what it is, for the tooltip and a screen reader


def points(rows: Sequence[Row]) -> list[Point]:
    """The rows that give both figures, as points."""
    return [
        Point(
            r.result,
            r.tok_s_per_user,
            r.output_tok_s_per_gpu,
            r.source,
            f"{r.model} on {r.hardware}, {r.recipe or r.engine}: "
            f"{r.tok_s_per_user:,.1f} tok/s per user, {r.output_tok_s_per_gpu:,.1f} tok/s/GPU, "
            + r.source
            + (f" {r.band.text}" if r.band is not None else ""),
        )
        for r in rows
        if r.tok_s_per_user is not None and r.output_tok_s_per_gpu is not None
    ]


def frontier(found: Sequence[Point]) -> list[Point]:
    """The points no other point beats on both figures (higher is better on each), by x."""
    best_y = -math.inf
    kept = []
    for p in sorted(found, key=lambda p: (-p.x, -p.y)):
        if p.y > best_y:
            kept.append(p)
            best_y = p.y
    return kept[::-1]


def nice_ticks(high: float, count: int = 5) -> list[float]:
    """Round tick values from 0 to at least `high`."""
    if high <= 0:
        return [0.0, 1.0]
    raw = high / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    return [i * step for i in range(math.ceil(high / step - 1e-9) + 1)]


def marker(kind: str, x: float, y: float, size: float = 5.5) -> str:
    """A point's shape: a circle (published), a square (measured), a triangle (simulated)."""
    shape = SHAPES.get(kind, "circle")
    if shape == "square":
        s = size * 0.9
        return f'<rect x="{x - s:.1f}" y="{y - s:.1f}" width="{2 * s:.1f}" height="{2 * s:.1f}"/>'
    if shape == "triangle":
        s = size * 1.2
        return (
            f'<polygon points="{x:.1f},{y - s:.1f} {x + s:.1f},{y + s * 0.8:.1f} '
            f'{x - s:.1f},{y + s * 0.8:.1f}"/>'
        )
    return f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{size:.1f}"/>'


def legend_marker(kind: str) -> Markup:
    """The kind's shape on its own, for the legend (decorative: the legend's words say it)."""
    return Markup(
        f'<svg class="kind-{escape(kind)}" width="14" height="14" viewBox="0 0 14 14" '
        f'aria-hidden="true" focusable="false"><g fill="currentColor">{marker(kind, 7, 7)}</g>'
        "</svg>"
    )


def chart(found: Sequence[Point], link: Callable[[str], str], caption: str) -> Markup:
    """The chart; `link` gives a result's address."""
    if not found:
        return Markup('<p class="muted">No ranked result gives both figures to chart.</p>')
    x_ticks = nice_ticks(max(p.x for p in found))
    y_ticks = nice_ticks(max(p.y for p in found))
    inner_w, inner_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def sx(x: float) -> float:
        return LEFT + x / x_ticks[-1] * inner_w

    def sy(y: float) -> float:
        return TOP + inner_h - y / y_ticks[-1] * inner_h

    out = [
        f'<svg class="pareto" viewBox="0 0 {WIDTH} {HEIGHT}" role="group" '
        f'aria-labelledby="pareto-title"><title id="pareto-title">{escape(caption)}</title>',
        '<g class="axes" aria-hidden="true">',
    ]
    for t in x_ticks:
        out.append(
            f'<line class="grid" x1="{sx(t):.1f}" y1="{TOP}" x2="{sx(t):.1f}" '
            f'y2="{TOP + inner_h}"/><text x="{sx(t):.1f}" y="{TOP + inner_h + 16}" '
            f'text-anchor="middle">{t:,.4g}</text>'
        )
    for t in y_ticks:
        out.append(
            f'<line class="grid" x1="{LEFT}" y1="{sy(t):.1f}" x2="{LEFT + inner_w}" '
            f'y2="{sy(t):.1f}"/><text x="{LEFT - 6}" y="{sy(t) + 4:.1f}" '
            f'text-anchor="end">{t:,.6g}</text>'
        )
    out.append(
        f'<text x="{LEFT + inner_w / 2:.1f}" y="{HEIGHT - 6}" text-anchor="middle">'
        "interactivity: tok/s per user (1000 / TPOT p50)</text>"
        f'<text transform="translate(14 {TOP + inner_h / 2:.1f}) rotate(-90)" '
        'text-anchor="middle">throughput: output tok/s per GPU</text></g>'
    )
    edge = frontier(found)
    path = " ".join(f"{sx(p.x):.1f},{sy(p.y):.1f}" for p in edge)
    out.append(f'<polyline class="frontier" aria-hidden="true" points="{path}"/>')
    on_edge = {id(p) for p in edge}
    # left to right, so that the tab order follows the x axis
    for p in sorted(found, key=lambda p: (p.x, p.y)):
        label = escape(p.label + (", on the frontier" if id(p) in on_edge else ""))
        out.append(
            f'<a href="{escape(link(p.result))}" class="point kind-{escape(p.kind)}" '
            f'data-result="{escape(p.result)}" data-kind="{escape(p.kind)}"'
            f'{" data-frontier" if id(p) in on_edge else ""} aria-label="{label}">'
            f"<title>{label}</title>{marker(p.kind, sx(p.x), sy(p.y))}</a>"
        )
    out.append("</svg>")
    return Markup("".join(out))
