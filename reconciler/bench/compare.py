"""Pure logic: two results side by side — what each ran, and each figure with the change from
the first to the second (B − A, and in percent of A), marked better or worse; a change within
the results' uncertainty (a simulated result's error band, a measured one's run-to-run noise)
is no clear difference, and names neither side."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Literal

from reconciler.catalog.cost import usd_per_m_output
from reconciler.catalog.ranking import ErrorBand
from reconciler.spec.base import Spec
from reconciler.spec.result import Percentiles, Result

Better = Literal["a", "b", "same", "unclear"]  # unclear: the change is within the uncertainty
Kind = Literal["throughput", "ttft", "tpot"]

# A measured or published result states no interval of its own: one run's figures are taken
# as good to ±2%, the run-to-run noise of one configuration on one machine
# (docs/benchmarks.md, "Comparing two results").
MEASURED_NOISE_PCT = 2.0


class Uncertainty(Spec):
    """How far one result's figures may be off, in percent, by the kind of figure."""

    throughput: float  # tok/s, tok/s/GPU, goodput, $/M output
    ttft: float
    tpot: float  # TPOT, ITL, E2E
    why: str  # e.g. 'measured: ±2% run-to-run noise'

    def of(self, kind: Kind) -> float:
        return {"throughput": self.throughput, "ttft": self.ttft, "tpot": self.tpot}[kind]


def uncertainty(result: Result, bands: Mapping[str, ErrorBand] | None = None) -> Uncertainty:
    """A result's uncertainty: a simulated one's 80% intervals (keyed by figure:
    output_tok_s_per_gpu, ttft_p50_ms, tpot_p50_ms; bench/ranked.py), else run-to-run noise."""
    noise = MEASURED_NOISE_PCT
    kind = result.source.kind
    if kind != "simulated" or not bands:
        why = f"{kind}: ±{noise:g}% run-to-run noise" + (
            " (no interval)" if kind == "simulated" else ""
        )
        return Uncertainty(throughput=noise, ttft=noise, tpot=noise, why=why)

    def pct(metric: str) -> float:
        band = bands.get(metric)
        return band.pct if band is not None else noise

    shown = ", ".join(f"{b.text} on {b.metric}" for b in bands.values())
    return Uncertainty(
        throughput=pct("output_tok_s_per_gpu"),
        ttft=pct("ttft_p50_ms"),
        tpot=pct("tpot_p50_ms"),
        why=f"simulated: the model's 80% interval, {shown}",
    )


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
    noise_pct: float | None = None  # a change up to this percent of A is no clear difference


class Comparison(Spec):
    a: str  # result ids
    b: str
    settings: list[Setting]
    figures: list[Figure]
    a_uncertainty: str  # Uncertainty.why of each side
    b_uncertainty: str


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


def _kind(name: str) -> Kind | None:
    """Which uncertainty a figure carries; None for counts (requests, errors), exact."""
    if name.startswith("TTFT"):
        return "ttft"
    if name.startswith(("TPOT", "ITL", "E2E")):
        return "tpot"
    return None if name in ("requests", "errors") else "throughput"


def _figure(
    name: str, unit: str, a: float | None, b: float | None, sides: tuple[Uncertainty, Uncertainty]
) -> Figure:
    if a is None or b is None:
        return Figure(name=name, unit=unit, a=a, b=b)
    delta = b - a
    pct = round(delta / a * 100, 2) if a else None
    kind = _kind(name)
    noise = max(side.of(kind) for side in sides) if kind is not None else None
    better: Better | None = "same"
    if name == "requests":  # more answers is a longer run, not a better one
        better = None
    elif delta and noise is not None and (pct is None or abs(pct) <= noise):
        better = "unclear"
    elif delta:
        better = "b" if (delta < 0) == name.startswith(LOWER_BETTER) else "a"
    return Figure(
        name=name,
        unit=unit,
        a=a,
        b=b,
        delta=round(delta, 6),
        delta_pct=pct,
        better=better,
        noise_pct=noise,
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


def compare(
    a: Result,
    b: Result,
    a_uncertainty: Uncertainty | None = None,
    b_uncertainty: Uncertainty | None = None,
) -> Comparison:
    """A against B; each side's uncertainty (default: its run-to-run noise) decides which
    changes are clear."""
    sides = (a_uncertainty or uncertainty(a), b_uncertainty or uncertainty(b))
    return Comparison(
        a=a.id,
        b=b.id,
        settings=[Setting(name=n, a=get(a), b=get(b)) for n, get in SETTINGS],
        figures=[_figure(n, unit, get(a), get(b), sides) for n, unit, get in FIGURES],
        a_uncertainty=sides[0].why,
        b_uncertainty=sides[1].why,
    )


# How a comparison is written, by `denv bench compare` and the UI's compare page.
BETTER_MARK = {"a": "A", "b": "B", "same": "=", "unclear": "≈"}


def unclear_note(c: Comparison) -> str | None:
    """What '≈' means, with each side's uncertainty; None when no figure is unclear."""
    if not any(f.better == "unclear" for f in c.figures):
        return None
    return (
        "≈ = no clear difference: B − A is within the results' uncertainty "
        f"(A {c.a_uncertainty}; B {c.b_uncertainty}), so neither is better"
    )


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
