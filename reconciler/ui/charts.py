"""Inline SVG charts (no library, nothing fetched): an alarm's readings as a sparkline."""

from __future__ import annotations

from collections.abc import Sequence

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
