"""Inline SVG charts (no library, nothing fetched): an alarm's readings as a sparkline, and
an elastic deployment's replicas over time against its load."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

from markupsafe import Markup, escape

WIDTH, HEIGHT = 240, 48


def sparkline(points: Sequence[tuple[float, float | None]], label: str) -> Markup:
    """Readings over time (None: no value yet, a gap), scaled to the box, with the last value
    and the range written beside it for a screen reader and for exact reading."""
    known = [(t, v) for t, v in points if v is not None]
    if len(known) < 2:
        return Markup(f'<span class="muted">{escape(label)}: not enough readings yet</span>')
    t0, t1 = known[0][0], known[-1][0]
    low, high = min(v for _, v in known), max(v for _, v in known)
    span_t, span_v = (t1 - t0) or 1.0, (high - low) or 1.0
    x = [(t - t0) / span_t * (WIDTH - 4) + 2 for t, _ in known]
    y = [HEIGHT - 2 - (v - low) / span_v * (HEIGHT - 4) for _, v in known]
    path = " ".join(f"{a:.1f},{b:.1f}" for a, b in zip(x, y, strict=True))
    summary = f"{label}: last {known[-1][1]:.4g}, range {low:.4g}–{high:.4g}, {len(known)} readings"
    return Markup(
        f'<svg class="spark" role="img" aria-label="{escape(summary)}" viewBox="0 0 {WIDTH} '
        f'{HEIGHT}" width="{WIDTH}" height="{HEIGHT}"><title>{escape(summary)}</title>'
        f'<polyline fill="none" stroke="currentColor" stroke-width="1.5" points="{path}"/></svg>'
        f' <span class="muted">last {known[-1][1]:.4g} (range {low:.4g}–{high:.4g})</span>'
    )


def replicas_chart(
    steps: Sequence[tuple[float, int]], load: Sequence[tuple[float, float]], label: str
) -> Markup:
    """An elastic deployment's replicas over time (a step line, from 0 up to its highest
    count) against its load (the arrival rate, a dashed line on a scale of its own), over the
    same span, with both written out for a screen reader and for exact reading."""
    times = [t for t, _ in steps] + [t for t, _ in load]
    if len(steps) < 2:
        return Markup(f'<span class="muted">{escape(label)}: no scaling decision yet</span>')
    t0, span_t = min(times), (max(times) - min(times)) or 1.0
    top_r = max(c for _, c in steps) or 1
    top_l = max((v for _, v in load), default=0.0) or 1.0

    def x(t: float) -> float:
        return (t - t0) / span_t * (WIDTH - 4) + 2

    def y(v: float, top: float) -> float:
        return HEIGHT - 2 - v / top * (HEIGHT - 4)

    stepped = [(x(steps[0][0]), y(steps[0][1], top_r))]
    for (_, before), (t, count) in pairwise(steps):
        stepped += [(x(t), y(before, top_r)), (x(t), y(count, top_r))]
    arrival = [(x(t), y(v, top_l)) for t, v in load]
    counts = "→".join(str(c) for c in _changes([c for _, c in steps]))
    summary = f"{label}: replicas {counts}"
    if load:
        low, high = min(v for _, v in load), max(v for _, v in load)
        summary += f"; arrival {low:.3g}–{high:.3g} req/s"
    lines = [f'<polyline class="replicas" fill="none" stroke="currentColor" '
             f'stroke-width="1.5" points="{_points(stepped)}"/>']  # fmt: skip
    if len(arrival) > 1:
        lines.append(
            f'<polyline class="load" fill="none" stroke="currentColor" stroke-width="1" '
            f'stroke-dasharray="3 2" opacity="0.6" points="{_points(arrival)}"/>'
        )
    return Markup(
        f'<svg class="spark scaling" role="img" aria-label="{escape(summary)}" viewBox="0 0 '
        f'{WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}"><title>{escape(summary)}</title>'
        + "".join(lines)
        + f'</svg> <span class="muted">replicas (solid, up to {top_r}) against arrival req/s '
        f"(dashed, up to {top_l:.3g})</span>"
    )


def _points(points: Sequence[tuple[float, float]]) -> str:
    return " ".join(f"{a:.1f},{b:.1f}" for a, b in points)


def _changes(counts: Sequence[int]) -> list[int]:
    """The counts, each run of the same one once."""
    return [c for i, c in enumerate(counts) if i == 0 or c != counts[i - 1]]
