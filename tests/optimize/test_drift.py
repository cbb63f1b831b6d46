"""Traffic drift: the distance between the shape a study optimized for and the shape now."""

from __future__ import annotations

import datetime as dt

import pytest

from reconciler.bench.traffic_stats import trace_stats
from reconciler.optimize.candidates import Row, StudyState
from reconciler.optimize.drift import drift
from reconciler.optimize.watch import remeasure_reasons
from reconciler.spec.result import TrafficLine


def shape(input_length: int, output_length: int, shared: bool, n: int = 40) -> list[TrafficLine]:
    return [
        TrafficLine(
            timestamp=i * 100,
            input_length=input_length,
            output_length=output_length,
            hash_ids=[1, 2] if shared else [2 * i + 10, 2 * i + 11],
        )
        for i in range(n)
    ]


BASE = trace_stats(shape(1000, 200, shared=False))


@pytest.mark.parametrize(
    ("now", "largest", "above"),
    [
        (shape(1000, 200, shared=False), "input p50", False),
        (shape(1100, 210, shared=False), "input p50", False),
        (shape(1000, 400, shared=False), "output p50", True),
        (shape(600, 200, shared=False), "input p50", True),
        (shape(1000, 200, shared=True), "prefix reuse", True),
    ],
    ids=["same", "small-change", "longer-answers", "shorter-prompts", "prefix-reuse"],
)
def test_distance_and_threshold(now: list[TrafficLine], largest: str, above: bool) -> None:
    found = drift(BASE, trace_stats(now))
    assert found.largest == largest
    assert found.exceeds(0.2) is above
    assert found.distance == max(found.components.values())


def test_doubling_a_length_reads_as_ln_2() -> None:
    found = drift(BASE, trace_stats(shape(2000, 200, shared=False)))
    assert found.components["input p50"] == pytest.approx(0.6931, abs=1e-4)
    assert "input p50" in found.describe()


def test_watch_measures_again_on_drift_and_on_catalog_news() -> None:
    at = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
    state = StudyState(
        release="r", stage="s", fleet="f", goal="throughput", budget_gpus=2, study="x",
        storage="sqlite://", traffic="t", traffic_digest="d", shape=BASE, started=at,
        catalog=["engine vllm 0.33.0", "recipe m/vllm@1 (vllm 0.33.0)"],
        current=Row(id="c-0", change="current", gpus=1, at=at),
    )  # fmt: skip
    same = ["engine vllm 0.33.0", "recipe m/vllm@1 (vllm 0.33.0)"]
    assert remeasure_reasons(state, BASE, same, 0.2) == []
    moved = trace_stats(shape(1000, 400, shared=False))
    [why] = remeasure_reasons(state, moved, same, 0.2)
    assert why.startswith("traffic drifted 0.69 (output p50)") and why.endswith("> 0.2")
    news = [*same, "engine vllm 0.34.0", "recipe m/sglang@1 (sglang 0.5.9)"]
    assert remeasure_reasons(state, None, news, 0.2) == [
        "new in the catalog: engine vllm 0.34.0",
        "new in the catalog: recipe m/sglang@1 (sglang 0.5.9)",
    ]
