"""benchmarks/autoscale.py: its day-shaped trace, the stages it sets up (planned without
starting any process but the agent's probe), and how it counts flaps, pending time and
GPU-hours. A whole run takes minutes on the local fleet, so it is not run here."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

import pytest

from reconciler.spec.loader import load_repo
from reconciler.spec.sources import WorkTree

ROOT = Path(__file__).resolve().parent.parent.parent


def load(name: str) -> ModuleType:
    """A module of benchmarks/, which import each other by name."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))


def test_the_day_rises_and_falls_more_than_five_times_with_bursts() -> None:
    day = load("autoscale_trace")
    assert day.TOP / day.BOTTOM >= 5
    # each burst lifts the rate over the curve around it
    for hour, _hours, _factor in day.BURSTS:
        assert day.day_rate(hour + 0.01) > day.day_rate(hour - 0.01) * 1.2


def test_the_trace_follows_the_day_with_chat_lengths() -> None:
    day = load("autoscale_trace")
    repo = load_repo(WorkTree(ROOT))
    lines = day.trace(360, 4.0, repo.workloads, seed=1)
    assert lines == day.trace(360, 4.0, repo.workloads, seed=1)  # the same for a seed
    stamps = [line.timestamp for line in lines]
    assert stamps == sorted(stamps) and stamps[-1] < 360_000
    # about the day's mean rate, and the busiest hour well over the quietest
    assert abs(len(lines) / 360 - 4.0 * day.MEAN / day.TOP) < 0.4
    per_hour = [sum(h * 15_000 <= t < (h + 1) * 15_000 for t in stamps) for h in range(24)]
    assert max(per_hour) >= 4 * max(1, min(per_hour))
    assert 400 < sum(line.input_length for line in lines) / len(lines) < 620
    assert 200 < sum(line.output_length for line in lines) / len(lines) < 310
    assert all(line.hash_ids for line in lines)


@pytest.mark.parametrize(
    ("events", "flaps"),
    [
        ([(0, 1, 2), (5, 2, 3), (30, 3, 2)], 0),  # up, up, down after the delay
        ([(0, 1, 2), (5, 2, 1)], 1),  # down within the delay of an up
        ([(0, 3, 2), (14, 2, 3)], 1),  # up within the delay of a down
        ([(0, 3, 2), (16, 2, 3)], 0),
    ],
    ids=["steady", "up-then-down", "down-then-up", "after-the-delay"],
)
def test_flaps_are_reversals_within_the_down_delay(
    events: list[tuple[float, int, int]], flaps: int
) -> None:
    assert load("autoscale_trace").flaps(events, 15.0) == flaps


def test_scale_events_are_read_from_the_bots_output() -> None:
    day = load("autoscale_trace")
    said = [
        (1.0, "[  9.4s] scale day/prod/bench: 1 → 2 (0.476 req/s over 0.365 per replica)"),
        (2.0, "[  9.4s] + start day.prod.bench.aggregated-1 on localhost"),
        (3.0, "[ 41.8s] scale day/prod/bench: 2 → 1 (0.651 req/s over 1.53 per replica)"),
    ]
    assert day.scale_events(said) == [(1.0, 1, 2), (3.0, 2, 1)]


def test_pending_is_the_time_more_was_asked_for_than_placed() -> None:
    day = load("autoscale_trace")
    asked = [(0.0, 1), (10.0, 3), (30.0, 2)]
    placed = [(0.0, 1), (11.0, 2), (12.0, 3), (40.0, 2)]
    # 10–12 s short (2 s), then enough
    assert day.pending_seconds(asked, placed, 50.0) == pytest.approx(2.0)
    assert day.gpu_seconds([(0.0, 1), (11.0, 2), (12.0, 3)], 14.0) == pytest.approx(19.0)


@pytest.mark.parametrize(
    ("peak", "hold_back", "elastic_gpus"),
    [(4, False, 5), (4, True, 3), (2, True, 2)],
    ids=["all-free", "half-held-back", "smallest"],
)
def test_each_stage_plans_its_count_on_its_own_fleet(
    peak: int, hold_back: bool, elastic_gpus: int
) -> None:
    autoscale = load("autoscale")
    plan = autoscale.stage_plan(peak, hold_back)
    assert [name for name, _, _ in plan] == ["static_peak", "static_mean", "elastic"]
    assert plan[0][1] == peak and plan[1][1] < peak and plan[2] == ("elastic", None, elastic_gpus)
    stages = [autoscale.Stage(name, replicas, peak, gpus) for name, replicas, gpus in plan]
    try:
        assert len({s.ws.address for s in stages}) == 3  # a loopback address each
        for stage, (_, replicas, gpus) in zip(stages, plan, strict=True):
            snap = stage.ws.look()
            (deployment,) = snap.desired.deployments
            assert deployment.replicas == (replicas or 1)
            assert snap.repo.fleets["bench"].gpus == gpus
            if replicas is None:
                assert deployment.bounds is not None and deployment.bounds.max == peak
                assert snap.repo.policies.scaling["bench"].down.delay == 15
    finally:
        for stage in stages:
            stage.stop(None)
    assert not any(s.ws.root.exists() for s in stages)
