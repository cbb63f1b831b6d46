"""What one replica serves (rollout/capacity.py): the simulator's highest arrival rate within
the stage's latency targets, for this repository's 8B recipe on an H200."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.rollout.capacity import Targets, replica_capacity, targets
from reconciler.spec.loader import open_repo
from reconciler.spec.policy import Alarm
from reconciler.spec.repo import Repo
from reconciler.spec.scaling import ScalingPolicy
from tests.conftest import ROOT

RECIPE = "llama-3.1-8b/vllm@1"
POLICY = ScalingPolicy()


@pytest.fixture(scope="module")
def repo() -> Repo:
    return open_repo(Path(ROOT))


def capacity(repo: Repo, input_length: int, output_length: int, wanted: Targets) -> float | None:
    recipe = repo.recipes[RECIPE]
    hardware = repo.resolve_hardware(repo.fleets["local"].hardware)
    assert hardware is not None
    model = repo.models[recipe.model]
    return replica_capacity(recipe, hardware, model, input_length, output_length, wanted)


def test_shorter_outputs_leave_a_replica_more_requests_per_second(repo: Repo) -> None:
    wanted = targets(POLICY, {})
    short = capacity(repo, 512, 128, wanted)
    long = capacity(repo, 512, 1024, wanted)
    assert short is not None and long is not None
    assert short > long * 1.5 > 0, (short, long)
    # the same shape again (lengths rounded to 64 tokens) is the cached answer
    assert capacity(repo, 500, 130, wanted) == short


def test_targets_no_replica_can_meet_give_no_capacity(repo: Repo) -> None:
    assert capacity(repo, 512, 128, (("ttft", "p99", 0.0001),)) is None


def test_a_tighter_target_lowers_the_capacity(repo: Repo) -> None:
    loose = capacity(repo, 512, 128, (("ttft", "p99", 2.0), ("itl", "p99", 0.1)))
    tight = capacity(repo, 512, 128, (("ttft", "p99", 0.2), ("itl", "p99", 0.1)))
    assert loose is not None and tight is not None and tight < loose


def test_the_targets_are_the_stage_latency_alarms_else_the_policys() -> None:
    alarms = {
        "ttft-p99-1.5s": Alarm(metric="ttft", stat="p99", max="1.5s"),
        "itl-p50-50ms": Alarm(metric="itl", stat="p50", max="50ms"),
        "errors-1pct": Alarm(metric="error_rate", max="1%"),
    }
    assert targets(POLICY, alarms) == (("itl", "p50", 0.05), ("ttft", "p99", 1.5))
    assert targets(POLICY, {"errors-1pct": alarms["errors-1pct"]}) == (
        ("ttft", "p99", 2.0),
        ("itl", "p99", 0.1),
    )
    own = POLICY.model_copy(update={"ttft": 0.5, "itl": 0.02})
    assert targets(own, {}) == (("ttft", "p99", 0.5), ("itl", "p99", 0.02))
