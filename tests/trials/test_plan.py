"""A trial's plan: where it lands (free trial GPUs only, ports no unit holds, ids and labels
the reconciler never takes for its own), what it runs and loads, and what the probe says of
its GPUs."""

from __future__ import annotations

import pytest

from reconciler.engines.units import EngineContext
from reconciler.errors import PlacementError
from reconciler.fleet.drivers.registry import rules_of
from reconciler.fleet.kinds.agenthosts import weights_dir
from reconciler.fleet.model.labels import record_key
from reconciler.fleet.model.observed import FleetObservation, Gpu, HostObservation, UnitRecord
from reconciler.spec.fleet import Fleet
from reconciler.spec.loader import open_repo
from reconciler.spec.recipe import Recipe
from reconciler.spec.repo import Repo
from reconciler.trials.plan import (
    TrialPlan,
    default_weights,
    plan_trial,
    probe_info,
    trial_spec,
)
from tests.conftest import ROOT
from tests.engines.conftest import fleet, recipe

RELEASE = {"release": "chat", "stage": "canary", "fleet": "test"}


@pytest.fixture(scope="module")
def repo() -> Repo:
    loaded = open_repo(ROOT)
    assert not loaded.errors, loaded.errors
    return loaded


def unit(
    uid: str, gpus: tuple[int, ...], port: int, labels: dict[str, str], alive: bool = True
) -> UnitRecord:
    return UnitRecord(id=uid, digest="d", gpus=gpus, port=port, alive=alive, labels=labels)


def seen(hosts: dict[str, list[UnitRecord]], gpus: int = 4) -> FleetObservation:
    found = FleetObservation("test")
    for name, units in hosts.items():
        found.hosts[name] = HostObservation(
            host=name,
            source="nvml",
            driver="570.86",
            runtime="12.8",
            gpus=tuple(Gpu(index=i, name="NVIDIA H200") for i in range(gpus)),
            units=tuple(units),
        )
    return found


def plan(
    repo: Repo, target: Fleet, observation: FleetObservation, spec: Recipe | None = None
) -> TrialPlan:
    spec = spec or recipe(topology={"mode": "aggregated", "gpus": 2})
    hardware = repo.resolve_hardware("h200")
    assert hardware is not None
    context = EngineContext(hardware=hardware, model=repo.models["llama-3.1-8b"])
    deployment = trial_spec(spec, target.name, "t1", "hf://org/model")
    return plan_trial(deployment, target, observation, context, 8, "bench", rules=rules_of(target))


def test_a_trial_takes_free_trial_gpus_and_free_ports_only(repo: Repo) -> None:
    # Trial GPUs: node-02's 1, 2 and 3. A release holds node-02's GPU 0 (and all of
    # node-01), an exited release unit still holds GPU 1 (it restarts in place), another
    # trial holds GPU 3 and the port blocks at 18000 and 18032.
    target = fleet(hosts=2, gpus=4, trial=3, simulated=True)
    observation = seen(
        {
            "node-01": [unit("chat.canary.test.aggregated-0", (0, 1, 2, 3), 8032, RELEASE)],
            "node-02": [
                unit("chat.canary.test.aggregated-1", (0,), 8064, RELEASE),
                unit("chat.canary.test.aggregated-2", (1,), 8096, RELEASE, alive=False),
                unit("trial-t0.aggregated-0", (3,), 18032, {"trial": "t0"}),
                unit("trial-t0.router", (), 18000, {"trial": "t0"}),
            ],
        }
    )
    one = recipe(topology={"mode": "aggregated", "gpus": 1})
    found = plan(repo, target, observation, one)
    assert [(u.host, u.unit.gpu_indices) for u in found.engines] == [("node-02", [2])]
    assert [u.id for u in found.units] == ["trial-t1.aggregated-0", "trial-t1.router"]
    held = {18000 + i for i in range(64)}
    assert all(u.unit.port not in held for u in found.units)
    assert found.endpoint == f"http://10.0.0.2:{found.router.unit.port}"
    for trial_unit in found.units:  # the reconciler's label reader never sees them as its own
        assert not {"release", "stage", "fleet"} & set(trial_unit.labels)
        record = UnitRecord(id=trial_unit.id, digest="d", labels=trial_unit.labels)
        assert record_key(record) is None
    assert found.units[0].labels["trial"] == "t1"
    assert found.units[0].payload()["labels"] == found.units[0].labels


@pytest.mark.parametrize(
    ("trial", "reachable", "message"),
    [
        (0, ("node-01", "node-02"), "fleet test has no trial GPUs (set trial_gpus in "),
        (3, ("node-01", "node-02"), "llama-3.1-8b/vllm@1 needs 2 GPUs; 1 of the 3 trial GPUs"),
        # node-02 did not answer: its trial GPUs are out, and node-01's GPUs 2 and 3 (which
        # the observed hosts alone would call the last ones) are a release's to place on
        (2, ("node-01",), "llama-3.1-8b/vllm@1 needs 2 GPUs; 0 of the 2 trial GPUs"),
    ],
    ids=["no-trial-gpus", "trial-gpus-taken", "unreachable-host"],
)
def test_a_trial_that_does_not_fit_says_why(
    repo: Repo, trial: int, reachable: tuple[str, ...], message: str
) -> None:
    target = fleet(hosts=2, gpus=4, trial=trial, simulated=True)
    busy = {"node-02": [unit("trial-t0.aggregated-0", (2, 3), 18032, {"trial": "t0"})]}
    observation = seen({name: busy.get(name, []) for name in reachable})
    with pytest.raises(PlacementError) as caught:
        plan(repo, target, observation)
    assert str(caught.value).startswith(message)


def test_probe_info_names_the_trials_gpus(repo: Repo) -> None:
    target = fleet(hosts=1, gpus=4, trial=2, simulated=True)
    found = plan(repo, target, seen({"node-01": []}))
    assert found.gpus_by_host() == {"node-01": [2, 3]}
    info = probe_info(found, seen({"node-01": []}))
    assert (info.driver, info.runtime, info.gpu_names) == ("570.86", "12.8", ["NVIDIA H200"])


def test_on_real_gpus_a_trial_runs_as_a_release_would(repo: Repo) -> None:
    target = fleet(hosts=1, gpus=4, trial=2, simulated=False)
    found = plan(repo, target, seen({"node-01": []}))
    engine, router = found.units
    assert engine.need is not None and engine.need.kind == "venv"  # no container engine seen
    assert engine.weights == "hf://org/model" and router.weights is None
    assert engine.unit.argv[0].endswith("/engines/vllm-0.33.0/bin/python")
    # it loads the weights the prepare step caches, on its trial GPUs
    assert weights_dir("/home/denv/.denv", "hf://org/model") in engine.unit.argv
    assert engine.unit.env["CUDA_VISIBLE_DEVICES"] == "2,3"
    # the engine, code a trial may not trust, as the fleet's trial user; the router, ours, not
    assert (engine.user, router.user) == ("denv-trial", None)
    assert engine.payload()["user"] == "denv-trial" and "user" not in router.payload()
    opted_out = plan(repo, target.model_copy(update={"trial_user": None}), seen({"node-01": []}))
    assert "user" not in opted_out.units[0].payload()


def test_default_weights_are_a_releases_pinned_ones(repo: Repo) -> None:
    served = repo.recipes["llama-3.1-8b/vllm@1"]  # releases/chat-8b runs it
    assert default_weights(repo, served) == repo.releases["chat-8b"].release.weights
    assert "@" in default_weights(repo, served)
    alone = recipe(model="llama-3.1-70b", engine="sglang")
    assert default_weights(repo, alone) == "hf://meta-llama/Llama-3.1-70B-Instruct"
