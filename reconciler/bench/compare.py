"""Pure logic: two results side by side — what each ran, and each figure with the change from
the first to the second (B − A, and in percent of A), marked better or worse."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from reconciler.catalog.cost import usd_per_m_output
from reconciler.spec.base import Spec
from reconciler.spec.result import Percentiles, Result

Better = Literal["a", "b", "same"]


class Setting(Spec):
    name: str
    a: str
    b: str


class Figure(Spec):
    name: str
    unit: str
    a: float | None
    b: float | None
    delta: float | None = None  # b − a
    delta_pct: float | None = None  # (b − a) / a × 100
    better: Better | None = None  # None: a side lacks the figure, or direction means nothing


class Comparison(Spec):
    a: str  # result ids
    b: str
    settings: list[Setting]
    figures: list[Figure]


def cost(result: Result) -> float | None:
    """$/M output: the result's own, else from the price it used."""
    if result.usd_per_m_output is not None:
        return result.usd_per_m_output
    m = result.metrics
    if result.price is None or not result.gpus or not m.output_tok_s:
        return None
    return usd_per_m_output(result.gpus, result.price.gpu_hour, m.output_tok_s)


Getter = Callable[[Result], float | None]


def _latency(name: str, series: Callable[[Result], Percentiles]) -> list[tuple[str, str, Getter]]:
    def pick(stat: str) -> Getter:
        return lambda r: {"p50": series(r).p50, "p90": series(r).p90, "p99": series(r).p99}[stat]

    return [(f"{name} {stat}", "ms", pick(stat)) for stat in ("p50", "p90", "p99")]


# Lower is better for every latency, for cost and for errors; higher for the rest.
LOWER_BETTER = ("TTFT", "TPOT", "ITL", "E2E", "$/M output", "errors")
FIGURES: list[tuple[str, str, Getter]] = [
    *_latency("TTFT", lambda r: r.metrics.ttft_ms),
    *_latency("TPOT", lambda r: r.metrics.tpot_ms),
    *_latency("ITL", lambda r: r.metrics.itl_ms),
    *_latency("E2E", lambda r: r.metrics.e2e_ms),
    ("output tok/s", "tok/s", lambda r: r.metrics.output_tok_s),
    ("output tok/s/GPU", "tok/s", lambda r: r.metrics.output_tok_s_per_gpu),
    ("goodput", "req/s", lambda r: r.metrics.goodput_rps),
    ("$/M output", "USD", cost),
    ("requests", "", lambda r: _number(r.metrics.requests)),
    ("errors", "", lambda r: _number(r.metrics.errors)),
]


def _number(value: int | None) -> float | None:
    return None if value is None else float(value)


def _figure(name: str, unit: str, a: float | None, b: float | None) -> Figure:
    if a is None or b is None:
        return Figure(name=name, unit=unit, a=a, b=b)
    delta = b - a
    pct = round(delta / a * 100, 2) if a else None
    better: Better | None = "same"
    if name == "requests":  # more answers is a longer run, not a better one
        better = None
    elif delta:
        better = "b" if (delta < 0) == name.startswith(LOWER_BETTER) else "a"
    return Figure(
        name=name, unit=unit, a=a, b=b, delta=round(delta, 6), delta_pct=pct, better=better
    )


def _load(result: Result) -> str:
    if result.load.concurrency is not None:
        return f"concurrency {result.load.concurrency}"
    return f"{result.load.rate:g} requests/s" if result.load.rate is not None else "…"


def _workload(result: Result) -> str:
    w = result.workload
    text = w.name or (f"traffic {w.traffic_digest[:12]}" if w.traffic_digest else "…")
    if w.isl and w.osl:
        text += f" {w.isl} in / {w.osl} out"
    return text


SETTINGS: list[tuple[str, Callable[[Result], str]]] = [
    ("model", lambda r: r.model),
    ("hardware", lambda r: r.hardware),
    ("GPUs", lambda r: str(r.gpus) if r.gpus else "…"),
    ("engine", lambda r: f"{r.engine.name} {r.engine.version or ''}".strip()),
    ("recipe", lambda r: r.recipe.id or "…"),
    ("load", _load),
    ("workload", _workload),
    ("source", lambda r: r.source.kind + (f", {r.source.at}" if r.source.at else "")),
]


def compare(a: Result, b: Result) -> Comparison:
    return Comparison(
        a=a.id,
        b=b.id,
        settings=[Setting(name=n, a=get(a), b=get(b)) for n, get in SETTINGS],
        figures=[_figure(n, unit, get(a), get(b)) for n, unit, get in FIGURES],
    )


# How a comparison is written, by `denv bench compare` and the UI's compare page.
BETTER_MARK = {"a": "A", "b": "B", "same": "="}


def figure_label(figure: Figure) -> str:
    """The figure's name with its unit, e.g. 'TTFT p99 (ms)' (tok/s goes without)."""
    unit = f" ({figure.unit})" if figure.unit and figure.unit != "tok/s" else ""
    return figure.name + unit


def figure_text(value: float | None, unit: str) -> str:
    """One side's value: '…' where the result lacks it."""
    if value is None:
        return "…"
    digits = 3 if unit == "USD" else (0 if unit in ("", "tok/s") else 2)
    return f"{value:,.{digits}f}" if digits else f"{round(value):,}"


def change_text(figure: Figure) -> str:
    """B − A, and in percent of A, signed, e.g. '+12.50 (+3.1%)'."""
    if figure.delta is None:
        return "…"
    sign = "+" if figure.delta > 0 else ""
    text = sign + figure_text(figure.delta, figure.unit)
    if figure.delta_pct is not None:
        text += f" ({sign}{figure.delta_pct:.1f}%)"
    return text
