"""An elastic stage's bake goes on while the autoscaler adds or removes replicas beyond its
minimum: a scale event is not a change of what the stage runs. A replica within the minimum
that is not ready, or a replace, still holds the stage back (a simulator on loopback answers
readiness; a second replica's port answers nothing, as a replica still loading)."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from reconciler.engines.units import Metrics, Probe, Unit
from reconciler.reconcile.desired import Desired, DesiredDeployment, DesiredUnit
from reconciler.reconcile.plan import Action, ActionKind, Plan, Wave
from reconciler.reconcile.snapshot import Snapshot
from reconciler.rollout.bot import stage_ready
from reconciler.spec.repo import Repo
from reconciler.spec.scaling import ReplicaBounds
from tests.engines.sim.sims import Sim, sim_process, sim_spec


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sim]:
    spec = sim_spec("llama-3.1-8b/vllm@1", time_scale=1000.0)
    with sim_process(spec, tmp_path_factory.mktemp("sim")) as one:
        yield one


def closed_port() -> int:
    with socket.socket() as s:  # bound, never listening: nothing answers there
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def replica(index: int, port: int) -> DesiredUnit:
    unit = Unit(
        name=f"aggregated-{index}", role="aggregated", replica=index, node=0, engine="sim",
        host="localhost", address="127.0.0.1", argv=[], env={}, port=port, gpus=1,
        gpu_indices=[index], readiness=Probe(path="/health"), metrics=Metrics(port=port),
    )  # fmt: skip
    return DesiredUnit(
        id=f"chat-8b.canary.local.aggregated-{index}", host="localhost", labels={}, unit=unit,
        fleet="local", digest="d", replica_gpus=1,
    )  # fmt: skip


def action(kind: ActionKind, wave: Wave, index: int) -> Action:
    return Action(
        kind=kind, wave=wave, release="chat-8b", stage="canary", fleet="local",
        host="localhost", unit=f"chat-8b.canary.local.aggregated-{index}", role="aggregated",
        replica=index, node=0, reason="new",
    )  # fmt: skip


def ready(sim: Sim, minimum: int | None, *actions: Action) -> bool:
    port = int(sim.url.rsplit(":", 1)[1])
    units = (replica(0, port), replica(1, closed_port()))
    deployment = DesiredDeployment(
        release="chat-8b", stage="canary", fleet="local", revision="r", gpus=2, replicas=2,
        bounds=ReplicaBounds(min=minimum, max=4) if minimum else None, endpoint=sim.url,
        units=units,
    )  # fmt: skip
    desired = Desired(head="h", deployments=(deployment,))
    plan = Plan(head="h", actions=actions)
    snap = Snapshot("h", Repo(label="test"), desired, {}, plan)
    return stage_ready(snap, [deployment], ["local"])


def test_a_replica_beyond_the_minimum_starting_does_not_hold_the_stage(sim: Sim) -> None:
    start = action(ActionKind.START, Wave.START, 1)
    assert ready(sim, 1, start)
    assert ready(sim, 1, action(ActionKind.STOP, Wave.TRIM, 2))  # a scale-down
    assert ready(sim, 1)  # started, loading: not waited for


def test_within_the_minimum_or_at_a_fixed_count_it_does(sim: Sim) -> None:
    assert not ready(sim, 2)  # the second replica is within min: it must answer
    assert not ready(sim, None)  # a fixed count: every replica must answer
    assert not ready(sim, None, action(ActionKind.START, Wave.START, 1))
    replace = action(ActionKind.REPLACE, Wave.ROLL, 1)
    assert not ready(sim, 1, replace)  # a new revision rolling: not the autoscaler's
