"""Models and pure logic: the 80% interval every simulator prediction carries — the 10th and
90th percentiles of the signed log ratio ln(predicted / measured) of held-out predictions
(`scripts/calibrate_sim.py --cv` writes them to calibration_intervals.json, next to the fitted
constants), per hardware × engine × layout × concurrency band; the fallback where a cell has
too few points; the widening outside the calibrated family; the absolute interval around a
prediction.

`read_interval_table` is the one reader: it reads that package file, at the edge (the CLI).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from importlib.resources import files
from typing import Literal

from reconciler.engines.model.stats import percentile
from reconciler.spec.base import Spec
from reconciler.spec.catalog import ModelArch

INTERVALS_FILE = "calibration_intervals.json"
Band = Literal["<=16", "17-63", ">=64", "all"]
Level = Literal["hardware", "generation", "all"]
Mode = Literal["aggregated", "disaggregated"]
BAND_TEXT: dict[Band, str] = {
    "<=16": "≤ 16 clients",
    "17-63": "17–63 clients",
    ">=64": "≥ 64 clients",
    "all": "any clients",
}
FIGURES = ("output_tok_s_per_gpu", "ttft_p50_ms", "tpot_p50_ms")
# A cell's 10th and 90th percentiles need this many held-out points to mean something; with
# fewer the lookup falls back to the hardware's generation, then to all hardware.
MIN_POINTS = 8
# Outside the calibrated family each reason moves both bounds outwards by half the interval's
# width, at least ln 1.2 (an assumption: no measurement outside the family says by how much).
WIDEN_MIN_LOG = math.log(1.2)


def band_of(concurrency: int | None) -> Band:
    """Concurrency bands: ≤ 16, 17–63, ≥ 64 clients; open loop and traces: all."""
    if concurrency is None:
        return "all"
    return "<=16" if concurrency <= 16 else ("17-63" if concurrency < 64 else ">=64")


class Residual(Spec):
    """One held-out prediction: signed ln(predicted / measured) of each figure."""

    point: str  # the result id
    configuration: str
    hardware: str
    generation: str
    engine: str
    mode: Mode
    concurrency: int
    mtp: bool
    output_tok_s_per_gpu: float
    ttft_p50_ms: float
    tpot_p50_ms: float


class LogRange(Spec):
    """10th and 90th percentiles of ln(predicted / measured)."""

    lo: float
    hi: float

    def holds(self, value: float) -> bool:
        return self.lo <= value <= self.hi


class Cell(Spec):
    level: Level
    key: str  # a hardware id, a generation, or "all"
    engine: str
    mode: Mode
    band: Band
    points: int
    output_tok_s_per_gpu: LogRange
    ttft_p50_ms: LogRange
    tpot_p50_ms: LogRange

    @property
    def name(self) -> str:
        return f"{self.key}, {self.engine}, {self.mode}, {BAND_TEXT[self.band]}"

    def ranges(self) -> dict[str, LogRange]:
        return {f: getattr(self, f) for f in FIGURES}


class IntervalTable(Spec):
    generated: str  # when and by which command
    engine: str  # the engine every calibration point ran
    model: str  # the model every calibration point served
    min_points: int
    # False: written by `--cv --frozen` from in-sample residuals (no refit), a stand-in until a
    # machine runs the refitting cross-validation; the intervals say so.
    held_out: bool = True
    # Share of held-out points inside their own cell's interval, per figure; `coverage_unseen`
    # builds each configuration's cells without its own points (the honest figure).
    coverage: dict[str, float] = {}
    coverage_unseen: dict[str, float] = {}
    # Each cell's range is widened about its middle by this factor per figure, the least that
    # puts 80% of each configuration's points inside cells built without it (`choose_scale`);
    # `coverage_nested` is that coverage with the factor chosen without the judged points too.
    scale: dict[str, float] = {}
    coverage_nested: dict[str, float] = {}
    cells: tuple[Cell, ...]


def read_interval_table() -> IntervalTable:
    """The table the calibration script last wrote (a file of this package)."""
    text = files("reconciler.engines.model").joinpath(INTERVALS_FILE).read_text()
    return IntervalTable.model_validate_json(text)


def cells_of(residuals: Sequence[Residual], scale: dict[str, float] | None = None) -> list[Cell]:
    """Every cell with at least one point: per layout and band (and all bands), per hardware,
    per generation and over all hardware; each figure's range widened by `scale` (default 1)."""
    groups: dict[tuple[Level, str, str, Mode, Band], list[Residual]] = {}
    for r in residuals:
        bands: tuple[Band, Band] = (band_of(r.concurrency), "all")
        levels: tuple[tuple[Level, str], ...] = (
            ("hardware", r.hardware),
            ("generation", r.generation),
            ("all", "all"),
        )
        for band in bands:
            for level, key in levels:
                groups.setdefault((level, key, r.engine, r.mode, band), []).append(r)
    out = []
    for (level, key, engine, mode, band), found in sorted(groups.items()):
        ranges = {
            f: scaled(
                LogRange(
                    lo=percentile([getattr(r, f) for r in found], 10),
                    hi=percentile([getattr(r, f) for r in found], 90),
                ),
                (scale or {}).get(f, 1.0),
            )
            for f in FIGURES
        }
        out.append(
            Cell(
                level=level,
                key=key,
                engine=engine,
                mode=mode,
                band=band,
                points=len(found),
                **ranges,
            )
        )
    return out


def scaled(r: LogRange, factor: float) -> LogRange:
    """The range widened about its middle by `factor`, rounded as the file keeps it."""
    middle, half = (r.lo + r.hi) / 2, (r.hi - r.lo) / 2 * factor
    return LogRange(lo=round(middle - half, 4), hi=round(middle + half, 4))


# Widening factors tried, smallest first: 1.00, 1.05, … 4.00.
SCALE_GRID = tuple(round(1 + 0.05 * i, 2) for i in range(61))
TARGET_COVERAGE = 0.8


class Unseen(Spec):
    """One point against the cell (built without its configuration) its lookup finds: per
    figure, its residual's distance from the cell's middle over the cell's half width (the
    point is inside the cell widened by k when that is at most k)."""

    configuration: str
    reach: dict[str, float]


def unseen(residuals: Sequence[Residual]) -> list[Unseen]:
    """Every point judged against cells built from every other configuration's residuals (a
    point whose layout has no other configuration is left out)."""
    found = []
    for config in sorted({r.configuration for r in residuals}):
        cells = cells_of([r for r in residuals if r.configuration != config])
        for r in (r for r in residuals if r.configuration == config):
            try:
                cell, _ = lookup(cells, r.hardware, r.generation, r.engine, r.mode, r.concurrency)
            except LookupError:
                continue
            reach = {}
            for f, rng in cell.ranges().items():
                half = max((rng.hi - rng.lo) / 2, 1e-9)
                reach[f] = abs(getattr(r, f) - (rng.lo + rng.hi) / 2) / half
            found.append(Unseen(configuration=config, reach=reach))
    return found


def unseen_coverage(points: Sequence[Unseen], scale: dict[str, float]) -> dict[str, float]:
    """Share of `points` inside their unseen cell widened by `scale`."""
    n = max(len(points), 1)
    return {f: round(sum(p.reach[f] <= scale.get(f, 1.0) for p in points) / n, 3) for f in FIGURES}


def choose_scale(points: Sequence[Unseen], target: float = TARGET_COVERAGE) -> dict[str, float]:
    """Per figure, the least factor of SCALE_GRID that covers `target` of `points`."""
    chosen = {}
    for f in FIGURES:
        fits = [k for k in SCALE_GRID if unseen_coverage(points, {f: k})[f] >= target]
        chosen[f] = fits[0] if fits else SCALE_GRID[-1]
    return chosen


def nested_coverage(points: Sequence[Unseen], folds: int = 5) -> dict[str, float]:
    """Coverage with the factor chosen without the judged configurations: configurations dealt
    into `folds`, each fold's points judged with the factor the other folds choose."""
    configs = sorted({p.configuration for p in points})
    fold_of = {c: i % folds for i, c in enumerate(configs)}
    inside = dict.fromkeys(FIGURES, 0)
    for fold in range(folds):
        judged = [p for p in points if fold_of[p.configuration] == fold]
        scale = choose_scale([p for p in points if fold_of[p.configuration] != fold])
        for f in FIGURES:
            inside[f] += sum(p.reach[f] <= scale[f] for p in judged)
    return {f: round(inside[f] / max(len(points), 1), 3) for f in FIGURES}


def lookup(
    cells: Iterable[Cell],
    hardware: str,
    generation: str,
    engine: str,
    mode: Mode,
    concurrency: int | None,
    min_points: int = MIN_POINTS,
) -> tuple[Cell, str | None]:
    """The cell of this hardware, engine, layout and band, or the first with enough points of:
    its generation, all hardware, all hardware over every band (taken however few). An engine
    the table does not hold takes the calibrated engine's cells (the caller widens them). The
    note says why a fallback was taken; None when the own cell served."""
    by_key = {(c.level, c.key, c.engine, c.mode, c.band): c for c in cells}
    engines = {c.engine for c in by_key.values()}
    if engine not in engines:
        engine = sorted(engines)[0]
    band = band_of(concurrency)
    tries: list[tuple[Level, str, Band]] = [
        ("hardware", hardware, band),
        ("generation", generation, band),
        ("all", "all", band),
        ("all", "all", "all"),
    ]
    skipped: list[str] = []
    for level, key, b in tries:
        cell = by_key.get((level, key, engine, mode, b))
        last = (level, key, b) == tries[-1]  # all there is, however few
        if cell is not None and (cell.points >= min_points or last):
            if not skipped:
                return cell, None
            return cell, f"too few points in {'; '.join(skipped)} (fewer than {min_points})"
        held = cell.points if cell else 0
        skipped.append(f"{key}, {BAND_TEXT[b]}: {held} points")
    raise LookupError(f"no {mode} cell of {engine}")


def widening(model: ModelArch, engine: str, table: IntervalTable) -> list[str]:
    """Why a prediction lies outside the calibrated family (DeepSeek-R1: MoE, MLA; SGLang)."""
    reasons = []
    if model.experts is None:
        reasons.append("dense model: calibrated on MoE only")
    if model.kv_lora_rank is None:
        reasons.append("GQA attention: calibrated on MLA only")
    if engine != table.engine:
        reasons.append(f"{engine}: calibrated on {table.engine} only")
    return reasons


def widened(r: LogRange, reasons: int) -> LogRange:
    """Each reason moves both bounds outwards by max(half the width, ln 1.2)."""
    step = max((r.hi - r.lo) / 2, WIDEN_MIN_LOG) * reasons
    return LogRange(lo=r.lo - step, hi=r.hi + step)


class Interval(Spec):
    lo: float
    hi: float


class ExpectedError(Spec):
    """Where the measured figure should fall 8 times in 10, in the figure's own unit."""

    output_tok_s_per_gpu: Interval
    ttft_p50_ms: Interval
    tpot_p50_ms: Interval
    cell: str
    points: int
    basis: str  # which residuals, written when and by which command
    fallback: str | None = None
    widened: list[str] = []


def interval(predicted: float, r: LogRange) -> Interval:
    """measured = predicted / exp(residual): the high residual gives the low bound."""
    return Interval(lo=predicted * math.exp(-r.hi), hi=predicted * math.exp(-r.lo))


def expected_error(
    predicted: dict[str, float],
    cell: Cell,
    fallback: str | None,
    reasons: list[str],
    basis: str = "",
) -> ExpectedError:
    ranges = {f: widened(r, len(reasons)) if reasons else r for f, r in cell.ranges().items()}
    return ExpectedError(
        **{f: interval(predicted[f], ranges[f]) for f in FIGURES},
        cell=cell.name,
        points=cell.points,
        basis=basis,
        fallback=fallback,
        widened=reasons,
    )


def for_prediction(
    table: IntervalTable,
    predicted: dict[str, float],
    hardware: str,
    generation: str,
    model: ModelArch,
    engine: str,
    mode: Mode,
    concurrency: int | None,
) -> ExpectedError:
    """The interval a prediction carries: its cell (or the fallback), widened outside the
    calibrated family."""
    cell, fallback = lookup(
        table.cells, hardware, generation, engine, mode, concurrency, table.min_points
    )
    kind = "held-out residuals" if table.held_out else "in-sample residuals (provisional)"
    basis = f"{kind}, {table.generated}"
    return expected_error(predicted, cell, fallback, widening(model, engine, table), basis)


def coverage(residuals: Sequence[Residual], cells: Sequence[Cell]) -> dict[str, float]:
    """Share of residuals inside the interval of their own cell (as the lookup finds it)."""
    inside = dict.fromkeys(FIGURES, 0)
    for r in residuals:
        cell, _ = lookup(cells, r.hardware, r.generation, r.engine, r.mode, r.concurrency)
        for f in FIGURES:
            inside[f] += cell.ranges()[f].holds(getattr(r, f))
    return {f: round(inside[f] / max(len(residuals), 1), 3) for f in FIGURES}
