"""pareto.py: the front, the mermaid block (verbatim) and the PNG chart."""

from __future__ import annotations

from pathlib import Path

import pytest
from matplotlib import image

from reconciler.bench.pareto import (
    Axis,
    Point,
    front,
    mermaid,
    point,
    points_of_levels,
    write_png,
)
from reconciler.spec.result import Load, Metrics, Percentiles

POINTS = [
    Point(label="c1", latency_ms=8.0, throughput=120.0),
    Point(label="c8", latency_ms=11.5, throughput=800.0),
    Point(label="c32", latency_ms=20.0, throughput=2400.0),
    Point(label="c48", latency_ms=26.0, throughput=2300.0),  # slower and no faster: dominated
    Point(label="c64", latency_ms=41.0, throughput=3100.0, saturated=True),
]


def test_front_keeps_points_no_other_point_beats_on_both() -> None:
    assert [p.label for p in front(POINTS)] == ["c1", "c8", "c32", "c64"]
    tie = [
        Point(label="a", latency_ms=5, throughput=10),
        Point(label="b", latency_ms=5, throughput=9),
    ]
    assert [p.label for p in front(tie)] == ["a"]


def test_mermaid_block_verbatim() -> None:
    assert mermaid(POINTS, "llama-3.1-8b on h200") == "\n".join(
        [
            "```mermaid",
            "xychart-beta",
            '    title "llama-3.1-8b on h200"',
            '    x-axis "TPOT p50 (ms)" ["c1 8 ms", "c8 11.5 ms", "c32 20 ms", "c48 26 ms", '
            '"c64 41 ms"]',
            '    y-axis "output tok/s per GPU" 0 --> 3410',
            "    bar [120.0, 800.0, 2400.0, 2300.0, 3100.0]",
            "    line [120.0, 800.0, 2400.0, 2400.0, 3100.0]",
            "```",
        ]
    )


def test_a_point_from_a_levels_metrics() -> None:
    metrics = Metrics(
        ttft_ms=Percentiles(p99=900.0), tpot_ms=Percentiles(p50=12.5), output_tok_s_per_gpu=640.0
    )
    assert point(Load(concurrency=16), metrics, Axis()) == Point(
        label="c16", latency_ms=12.5, throughput=640.0
    )
    by_ttft = point(Load(rate=2.5), metrics, Axis(metric="ttft", stat="p99"))
    assert by_ttft is not None and (by_ttft.label, by_ttft.latency_ms) == ("2.5/s", 900.0)
    assert point(Load(concurrency=1), Metrics(), Axis()) is None


def test_points_of_a_sweep_mark_saturated_levels() -> None:
    from tests.cli.test_bench_view import level

    points = points_of_levels([level(Load(concurrency=8)), level(Load(rate=40.0), True)])
    assert [(p.label, p.latency_ms, p.saturated) for p in points] == [
        ("c8", 9.87, False),
        ("40/s", 9.87, True),
    ]


@pytest.mark.parametrize("axis", [Axis(), Axis(metric="e2e", stat="p90")], ids=["tpot", "e2e"])
def test_png_chart(tmp_path: Path, axis: Axis) -> None:
    path = write_png(POINTS, tmp_path / "charts" / "pareto.png", "llama-3.1-8b on h200", axis)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    height, width, _ = image.imread(path).shape
    assert (width, height) == (840, 540)  # 7 × 4.5 inches at 120 dpi
