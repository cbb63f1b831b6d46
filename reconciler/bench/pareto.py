"""Throughput against latency: the points of a sweep (or any results), their Pareto front
(no other point is both faster and higher in throughput), a PNG chart (matplotlib, Agg) and
a mermaid `xychart-beta` block for markdown. Everything but `write_png` is pure."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from reconciler.bench.metrics import LevelMetrics
from reconciler.catalog.latency import MetricName, Slo, StatName, format_ms
from reconciler.spec.base import Spec
from reconciler.spec.result import Load, Metrics, Result


class Point(Spec):
    label: str  # the load, e.g. c8 or 2.5/s
    latency_ms: float
    throughput: float  # output tok/s per GPU
    saturated: bool = False


class Axis(Spec):
    """Which latency figure the chart puts on its x axis."""

    metric: MetricName = "tpot"
    stat: StatName = "p50"

    @property
    def title(self) -> str:
        return f"{self.metric.upper()} {self.stat} (ms)"

    def value(self, metrics: Metrics) -> float | None:
        # the objective's own lookup: one place knows where each statistic lives
        return Slo(metric=self.metric, stat=self.stat, max_ms=1.0).figure(metrics)


TPOT_P50 = Axis()  # per-user speed's latency: what a sweep of concurrency moves most


def load_label(load: Load) -> str:
    if load.concurrency is not None:
        return f"c{load.concurrency}"
    return f"{load.rate:.3g}/s" if load.rate is not None else "?"


def point(load: Load, metrics: Metrics, axis: Axis, saturated: bool = False) -> Point | None:
    """A point for a load level; None when it lacks either figure."""
    latency = axis.value(metrics)
    if latency is None or metrics.output_tok_s_per_gpu is None:
        return None
    return Point(
        label=load_label(load),
        latency_ms=latency,
        throughput=metrics.output_tok_s_per_gpu,
        saturated=saturated,
    )


def points_of_levels(levels: Sequence[LevelMetrics], axis: Axis = TPOT_P50) -> list[Point]:
    """A sweep's levels, saturated ones marked."""
    found = (point(lv.load, lv.metrics, axis, lv.saturation.saturated) for lv in levels)
    return [p for p in found if p is not None]


def points_of(results: Sequence[Result], axis: Axis = TPOT_P50) -> list[Point]:
    found = (point(r.load, r.metrics, axis) for r in results)
    return [p for p in found if p is not None]


def front(points: Sequence[Point]) -> list[Point]:
    """The Pareto front, by latency: each point has more throughput than every faster one."""
    best = float("-inf")
    out = []
    for p in sorted(points, key=lambda p: (p.latency_ms, -p.throughput)):
        if p.throughput > best:
            out.append(p)
            best = p.throughput
    return out


def mermaid(points: Sequence[Point], title: str, axis: Axis = TPOT_P50) -> str:
    """An `xychart-beta` block. Mermaid's x axis is categorical, so the points stand in
    latency order, each labelled with its load and latency: bars are every point's
    throughput, the line is the front (the best throughput at that latency or lower)."""
    ordered = sorted(points, key=lambda p: p.latency_ms)
    labels = ", ".join(f'"{p.label} {format_ms(p.latency_ms)}"' for p in ordered)
    bars, envelope, best = [], [], 0.0
    for p in ordered:
        best = max(best, p.throughput)
        bars.append(f"{p.throughput:.1f}")
        envelope.append(f"{best:.1f}")
    top = max((p.throughput for p in ordered), default=1.0) * 1.1
    return "\n".join(
        [
            "```mermaid",
            "xychart-beta",
            f'    title "{_quoted(title)}"',
            f'    x-axis "{axis.title}" [{labels}]',
            f'    y-axis "output tok/s per GPU" 0 --> {top:.0f}',
            f"    bar [{', '.join(bars)}]",
            f"    line [{', '.join(envelope)}]",
            "```",
        ]
    )


def _quoted(text: str) -> str:
    return text.replace('"', "'")


def write_png(points: Sequence[Point], path: Path, title: str, axis: Axis = TPOT_P50) -> Path:
    """The chart as a PNG: every point labelled with its load, the front as a line,
    saturated points as red crosses."""
    import matplotlib

    matplotlib.use("Agg")  # files only: never a window
    from matplotlib import pyplot

    figure, axes = pyplot.subplots(figsize=(7, 4.5), dpi=120)
    try:
        calm = [p for p in points if not p.saturated]
        hot = [p for p in points if p.saturated]
        best = front(points)
        axes.plot(
            [p.latency_ms for p in best],
            [p.throughput for p in best],
            "-",
            color="tab:blue",
            label="Pareto front",
        )
        axes.scatter([p.latency_ms for p in calm], [p.throughput for p in calm], color="tab:blue")
        if hot:
            axes.scatter(
                [p.latency_ms for p in hot],
                [p.throughput for p in hot],
                marker="x",
                color="tab:red",
                label="saturated",
            )
        for p in points:
            axes.annotate(
                p.label, (p.latency_ms, p.throughput), textcoords="offset points", xytext=(4, 4)
            )
        axes.set_xlabel(axis.title)
        axes.set_ylabel("output tok/s per GPU")
        axes.set_title(title)
        axes.set_ylim(bottom=0)
        axes.margins(x=0.1)  # room for the labels of the end points
        axes.grid(True, alpha=0.3)
        axes.legend(loc="lower right")
        figure.tight_layout()
        path.parent.mkdir(parents=True, exist_ok=True)
        figure.savefig(path, format="png")
    finally:
        pyplot.close(figure)
    return path
