"""The 80% interval a prediction carries: the cells of held-out residuals, the fallback where a
cell is thin, the widening outside the calibrated family, and the absolute bounds."""

from __future__ import annotations

import math

import pytest

from reconciler.engines.model.error_intervals import (
    FIGURES,
    Cell,
    IntervalTable,
    LogRange,
    Residual,
    Unseen,
    band_of,
    cells_of,
    choose_scale,
    coverage,
    for_prediction,
    interval,
    lookup,
    nested_coverage,
    read_interval_table,
    scaled,
    unseen,
    unseen_coverage,
    widened,
    widening,
)
from tests.engines.model.perfspecs import model


def _residual(i: int, hardware: str = "b200", concurrency: int = 4, value: float = 0.0) -> Residual:
    return Residual(
        point=f"p{i}",
        configuration=f"c{i % 3}",
        hardware=hardware,
        generation="blackwell" if hardware.startswith("b") else "hopper",
        engine="sglang",
        mode="aggregated",
        concurrency=concurrency,
        mtp=False,
        output_tok_s_per_gpu=value,
        ttft_p50_ms=2 * value,
        tpot_p50_ms=-value,
    )


@pytest.mark.parametrize(
    ("concurrency", "band"),
    [(None, "all"), (1, "<=16"), (16, "<=16"), (17, "17-63"), (63, "17-63"), (64, ">=64")],
)
def test_concurrency_bands(concurrency: int | None, band: str) -> None:
    assert band_of(concurrency) == band


def test_interval_divides_by_the_residual_ratios() -> None:
    # measured = predicted / exp(residual): overprediction (residual > 0) lowers the bound.
    found = interval(100.0, LogRange(lo=-0.1, hi=0.2))
    assert found.lo == pytest.approx(100 * math.exp(-0.2))
    assert found.hi == pytest.approx(100 * math.exp(0.1))


def test_cells_hold_the_10th_and_90th_percentiles_per_level() -> None:
    residuals = [_residual(i, value=i / 100) for i in range(11)]  # 0.00 … 0.10
    cells = {(c.level, c.key, c.band): c for c in cells_of(residuals)}
    own = cells[("hardware", "b200", "<=16")]
    assert own.points == 11
    assert (own.output_tok_s_per_gpu.lo, own.output_tok_s_per_gpu.hi) == (0.01, 0.09)
    assert (own.tpot_p50_ms.lo, own.tpot_p50_ms.hi) == (-0.09, -0.01)
    assert {("generation", "blackwell", "all"), ("all", "all", "<=16")} <= set(cells)


def test_lookup_takes_the_own_cell_then_the_generation_then_all() -> None:
    residuals = [_residual(i, "b300", value=0.3) for i in range(3)]
    residuals += [_residual(i, "b200", value=0.1) for i in range(6)]
    residuals += [_residual(i, "h200", value=-0.2) for i in range(8)]
    cells = cells_of(residuals)
    cell, note = lookup(cells, "h200", "hopper", "sglang", "aggregated", 8)
    assert (cell.key, note) == ("h200", None)
    cell, note = lookup(cells, "b300", "blackwell", "sglang", "aggregated", 8)
    assert (cell.level, cell.key, cell.points) == ("generation", "blackwell", 9)
    assert note is not None and "b300, ≤ 16 clients: 3 points" in note
    cell, note = lookup(cells, "b300", "blackwell", "sglang", "aggregated", 8, min_points=10)
    assert (cell.key, cell.points) == ("all", 17)
    # Nothing at ≥ 64 clients anywhere: all bands of all hardware, however few.
    cell, note = lookup(cells, "b300", "blackwell", "sglang", "aggregated", 128, min_points=30)
    assert (cell.key, cell.band, cell.points) == ("all", "all", 17)
    assert note is not None and "≥ 64 clients: 0 points" in note


def test_widening_names_each_reason_and_moves_both_bounds() -> None:
    table = IntervalTable(generated="test", engine="sglang", model="deepseek-r1", min_points=8,
                          cells=())  # fmt: skip
    assert widening(model("deepseek-r1"), "sglang", table) == []
    reasons = widening(model("llama-3.1-8b"), "vllm", table)
    assert reasons == [
        "dense model: calibrated on MoE only",
        "GQA attention: calibrated on MLA only",
        "vllm: calibrated on sglang only",
    ]
    wide = widened(LogRange(lo=-0.5, hi=0.5), 2)  # half width 0.5 > ln 1.2: ±1.0
    assert (wide.lo, wide.hi) == pytest.approx((-1.5, 1.5))
    narrow = widened(LogRange(lo=0.0, hi=0.1), 1)  # at least ln 1.2 a reason
    assert (narrow.lo, narrow.hi) == pytest.approx((-math.log(1.2), 0.1 + math.log(1.2)))


def test_coverage_counts_points_inside_their_cell() -> None:
    residuals = [_residual(i, value=i / 100) for i in range(11)]
    # 0.01 … 0.09 inside [0.01, 0.09]: 9 of 11.
    assert coverage(residuals, cells_of(residuals))["output_tok_s_per_gpu"] == round(9 / 11, 3)


def test_a_prediction_outside_the_family_is_widened_and_says_why() -> None:
    residuals = [_residual(i, "h200", value=0.1 * (i % 3 - 1)) for i in range(9)]
    table = IntervalTable(generated="test", engine="sglang", model="deepseek-r1", min_points=8,
                          cells=tuple(cells_of(residuals)))  # fmt: skip
    predicted = {"output_tok_s_per_gpu": 100.0, "ttft_p50_ms": 50.0, "tpot_p50_ms": 10.0}
    own = for_prediction(table, predicted, "h200", "hopper", model("deepseek-r1"), "sglang",
                         "aggregated", 4)  # fmt: skip
    other = for_prediction(table, predicted, "h200", "hopper", model("llama-3.1-8b"), "vllm",
                           "aggregated", 4)  # fmt: skip
    assert own.widened == [] and len(other.widened) == 3
    assert other.cell == own.cell == "h200, sglang, aggregated, ≤ 16 clients"
    assert other.output_tok_s_per_gpu.lo < own.output_tok_s_per_gpu.lo
    assert other.output_tok_s_per_gpu.hi > own.output_tok_s_per_gpu.hi


def test_the_written_table_has_a_cell_for_every_calibrated_hardware() -> None:
    table = read_interval_table()
    keys = {c.key for c in table.cells if c.level == "hardware" and c.mode == "aggregated"}
    assert {"b200", "b300", "h200", "mi300x", "mi325x", "mi355x"} <= keys
    assert all(isinstance(c, Cell) and c.points > 0 for c in table.cells)


def _config_residual(config: int, i: int, value: float) -> Residual:
    return _residual(i, value=value).model_copy(update={"configuration": f"c{config}"})


def test_a_configuration_is_judged_by_cells_built_without_it() -> None:
    # c0 sits far out; the other four configurations spread around 0.
    residuals = [
        _config_residual(c, 10 * c + i, 0.01 * i - 0.05) for c in range(1, 5) for i in range(11)
    ]
    residuals += [_config_residual(0, i, 0.5) for i in range(5)]
    judged = unseen(residuals)
    assert len(judged) == len(residuals)
    far = [p for p in judged if p.configuration == "c0"]
    # cells without c0: the range of -0.05 … 0.05 is [-0.04, 0.04]; 0.5 is 12.5 half widths out
    assert far[0].reach["output_tok_s_per_gpu"] == pytest.approx(12.5)
    assert unseen_coverage(far, {})["output_tok_s_per_gpu"] == 0.0
    assert unseen_coverage(far, {"output_tok_s_per_gpu": 13.0})["output_tok_s_per_gpu"] == 1.0


def test_the_scale_is_the_least_that_covers_80_percent_and_widens_the_cells() -> None:
    points = [
        Unseen(configuration=f"c{i}", reach=dict.fromkeys(FIGURES, 1 + i / 10)) for i in range(10)
    ]  # fmt: skip  reaches 1.0 … 1.9
    scale = choose_scale(points)
    assert scale == dict.fromkeys(FIGURES, 1.7)  # 1.0 … 1.7: 8 of 10
    assert unseen_coverage(points, scale) == dict.fromkeys(FIGURES, 0.8)
    wide = scaled(LogRange(lo=-0.1, hi=0.3), 1.5)
    assert (wide.lo, wide.hi) == pytest.approx((-0.2, 0.4))  # middle 0.1, half width 0.3


def test_nested_coverage_chooses_each_folds_scale_on_the_others() -> None:
    # every configuration reaches 1.0 except one far out: the others' choice leaves it out
    points = [Unseen(configuration=f"c{i}", reach=dict.fromkeys(FIGURES, 1.0)) for i in range(9)]
    points.append(Unseen(configuration="c9", reach=dict.fromkeys(FIGURES, 9.0)))
    assert nested_coverage(points, folds=5) == dict.fromkeys(FIGURES, 0.9)


def test_the_written_table_is_widened_for_unseen_configurations() -> None:
    table = read_interval_table()
    assert table.held_out and set(table.scale) == set(FIGURES)
    assert all(k >= 1 for k in table.scale.values())
    assert all(0.75 <= table.coverage_nested[f] <= 0.9 for f in FIGURES), table.coverage_nested
