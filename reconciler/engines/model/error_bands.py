"""Models and pure logic: how far the simulator's predictions fall from measurements — the
error table `scripts/calibrate_sim.py --cv --write` writes from its held-out residuals
(calibration_errors.json, next to the fitted constants; `--errors` writes the in-sample one)
— its median errors by hardware, which docs/simulator.md shows. The interval a simulated
result carries (`denv bench`, `denv sim predict`) comes from error_intervals.py.
docs/simulator.md's error tables are rendered from the same files (`markdown_table`); a test
keeps them equal.

`read_error_table` is the one reader: it reads that package file, at the edge (the CLI).
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib.resources import files
from typing import Literal

from reconciler.spec.base import Spec

ERRORS_FILE = "calibration_errors.json"  # cross-validated once --cv has run
IN_SAMPLE_FILE = "calibration_errors_in_sample.json"  # --errors: docs/simulator.md's appendix
Mode = Literal["aggregated", "disaggregated"]
ALL = "all"


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
    text = files("reconciler.engines.model").joinpath(name).read_text()
    return ErrorTable.model_validate_json(text)


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
