"""Models and pure logic: how far the simulator's predictions fall from measurements — the
error table `scripts/calibrate_sim.py --cv --write` writes from its held-out residuals
(calibration_errors.json, next to the fitted constants; `--errors` writes the in-sample one)
— and the band a simulated result carries for its hardware, engine and layout.
docs/simulator.md's error tables are rendered from the same files (`markdown_table`); a test
keeps them equal.

`read_error_table` is the one reader: it reads that package file, at the edge (the CLI).
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib.resources import files
from typing import Literal

from reconciler.catalog.ranking import ErrorBand
from reconciler.spec.base import Spec

ERRORS_FILE = "calibration_errors.json"  # bench's bands: cross-validated once --cv has run
IN_SAMPLE_FILE = "calibration_errors_in_sample.json"  # --errors: docs/simulator.md's appendix
Metric = Literal["tok_s_per_gpu", "ttft_p50", "tpot_p50"]
Mode = Literal["aggregated", "disaggregated"]
ALL = "all"
_METRIC_TEXT: dict[Metric, str] = {
    "tok_s_per_gpu": "tok/s/GPU",
    "ttft_p50": "TTFT p50",
    "tpot_p50": "TPOT p50",
}


class ErrorGroup(Spec):
    """Median absolute percentage error (%) over a group of calibration points: one hardware,
    or a summary group (`all`, `all, with MTP`, `all, <= 16 clients`, …)."""

    group: str
    points: int
    tok_s_per_gpu: float
    ttft_p50: float
    tpot_p50: float


class ErrorTable(Spec):
    generated: str  # when and by which command
    engine: str  # the engine every calibration point ran
    model: str  # the model every calibration point served
    # True: median errors of held-out predictions (`--cv --write`); False: in sample (--errors)
    held_out: bool = False
    aggregated: tuple[ErrorGroup, ...]
    disaggregated: tuple[ErrorGroup, ...]

    def groups(self, mode: Mode) -> tuple[ErrorGroup, ...]:
        return self.aggregated if mode == "aggregated" else self.disaggregated


def read_error_table(name: str = ERRORS_FILE) -> ErrorTable:
    """The table the calibration script last wrote (a file of this package)."""
    text = files("reconciler.engines.sim").joinpath(name).read_text()
    return ErrorTable.model_validate_json(text)


def band(
    table: ErrorTable, hardware: str, engine: str, model: str, mode: Mode, metric: Metric
) -> ErrorBand | None:
    """The median error of `metric` on the calibration points of this hardware and layout;
    where there are none, the median over all points of the layout. The basis says which,
    and names what the calibration data does not cover (another engine, another model)."""
    groups = {g.group: g for g in table.groups(mode)}
    own = groups.get(hardware)
    chosen = own or groups.get(ALL)
    if chosen is None:
        return None
    held = "held-out " if table.held_out else ""
    basis = f"{chosen.points} {held}{mode} {table.engine} {table.model} points"
    basis = f"{hardware}, {basis}" if own else f"{basis}; none on {hardware}"
    gaps = [f"{engine} not calibrated"] if engine != table.engine else []
    gaps += [f"{model} not calibrated"] if model != table.model else []
    return ErrorBand(
        pct=_figure(chosen, metric),
        metric=_METRIC_TEXT[metric],
        basis="; ".join([basis, *gaps]),
        extrapolated=own is None or bool(gaps),
    )


def _figure(group: ErrorGroup, metric: Metric) -> float:
    if metric == "tok_s_per_gpu":
        return group.tok_s_per_gpu
    return group.ttft_p50 if metric == "ttft_p50" else group.tpot_p50


def markdown_table(groups: Sequence[ErrorGroup]) -> str:
    """The table docs/simulator.md shows: whole percentages, ≤ and ≥ for <= and >=."""
    lines = [
        "| hardware | points | tok/s/GPU | TTFT p50 | TPOT p50 |",
        "|---|---:|---:|---:|---:|",
    ]
    for g in groups:
        name = g.group.replace("<=", "≤").replace(">=", "≥")
        cells = (f"{round(v)}%" for v in (g.tok_s_per_gpu, g.ttft_p50, g.tpot_p50))
        lines.append(f"| {name} | {g.points} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
