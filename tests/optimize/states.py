"""A study's state as the optimizer stores it, made up for the tests that read it (the
candidates' table and pull request, the UI's optimizer page): capacity runs, candidates, one
study of chat-8b's canary."""

from __future__ import annotations

import datetime as dt
from typing import Any

from reconciler.bench.traffic_stats import trace_stats
from reconciler.optimize.candidates import Row, Run, Status, StudyState
from reconciler.spec.result import Metrics, Percentiles, TrafficLine

AT = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)


def run(goodput: float, ttft: float) -> Run:
    """A capacity run: `goodput` req/s/GPU on one GPU, at a rate of 2 × that."""
    metrics = Metrics(ttft_ms=Percentiles(p99=ttft), requests=10)
    return Run(metrics=metrics, goal=goodput, rate=2 * goodput, speed=1.0)


def row(cid: str, status: Status, goodput: float, ttft: float = 400.0, **extra: Any) -> Row:
    """Candidate `cid` with one capacity run."""
    runs = [run(goodput, ttft)]
    return Row(id=cid, change=f"change {cid}", gpus=1, status=status, runs=runs, at=AT, **extra)


def study_state(current: Row, candidates: list[Row], **extra: Any) -> StudyState:
    """chat-8b's canary studied for throughput on the local fleet, started at AT."""
    line = TrafficLine(timestamp=0, input_length=900, output_length=32, hash_ids=[1])
    return StudyState(
        release="chat-8b",
        stage="canary",
        fleet="local",
        goal="throughput",
        budget_gpus=4,
        study="chat-8b.canary.throughput",
        storage="sqlite:///x.db",
        traffic="t.jsonl",
        traffic_digest="d",
        shape=trace_stats([line]),
        started=AT,
        current=current,
        candidates=candidates,
        **extra,
    )
