"""The simulator's batch histogram exposes what prometheus_client's Histogram does."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Histogram, generate_latest

from reconciler.engines.sim.metrics import ITL_BUCKETS, BatchHistogram


def exposition(registry: CollectorRegistry) -> list[str]:
    """The text exposition, less the `_created` timestamps' values."""
    lines = generate_latest(registry).decode().splitlines()
    return [line.rsplit(" ", 1)[0] if "_created" in line else line for line in lines]


def test_many_observations_at_once_expose_as_one_at_a_time() -> None:
    observed = [(0.0005, 1), (0.001, 3), (0.0125, 250), (0.05, 2), (3.0, 1), (100.0, 4)]
    theirs, ours = CollectorRegistry(), CollectorRegistry()
    reference = Histogram(
        "vllm:inter_token_latency_seconds",
        "Time between streamed tokens.",
        ("model_name", "engine"),
        buckets=ITL_BUCKETS,
        registry=theirs,
    ).labels("m", "0")
    batch = BatchHistogram(
        "vllm:inter_token_latency_seconds",
        "Time between streamed tokens.",
        {"model_name": "m", "engine": "0"},
        ITL_BUCKETS,
        ours,
    )
    for value, count in observed:
        batch.observe(value, count)
        for _ in range(count):
            reference.observe(value)
    assert exposition(ours) == exposition(theirs)
