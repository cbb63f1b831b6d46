"""Which engine runs a deployment, the simulator's units, and the router in front."""

from __future__ import annotations

import pytest

from reconciler.engines.cards import cards
from reconciler.engines.launch import engine_name
from reconciler.engines.model.spec import SimSpec
from reconciler.engines.sglang import card as sglang
from reconciler.engines.sim import card as simulated
from reconciler.engines.vllm import card as vllm
from reconciler.spec.repo import Repo
from tests.engines.conftest import deployment, fleet, recipe, units_of

PD = {
    "mode": "disaggregated",
    "prefill": {"gpus": 2, "parallel": {"tp": 2}},
    "decode": {"gpus": 4, "parallel": {"tp": 4}},
}


def test_registry() -> None:
    assert {"vllm": vllm, "sglang": sglang, "sim": simulated} == cards()
    assert simulated.ALARM_SERIES == vllm.ALARM_SERIES  # it serves vLLM's names


@pytest.mark.parametrize(
    ("engine", "simulated_fleet", "runs"),
    [("vllm", False, "vllm"), ("sglang", False, "sglang"), ("sim", False, "sim"),
     ("vllm", True, "sim"), ("sglang", True, "sim")],
)  # fmt: skip
def test_engine_name(engine: str, simulated_fleet: bool, runs: str) -> None:
    version = {"vllm": "0.33.0", "sglang": "0.5.23", "sim": "0.1"}[engine]
    spec = deployment(recipe(engine, version))
    assert engine_name(spec, fleet(simulated=simulated_fleet)) == runs


def test_simulated_fleet_runs_any_recipe_as_the_simulator(repo: Repo) -> None:
    spec = recipe("vllm", "0.33.0", topology=PD, settings={"max_batch": 64})
    target = fleet(hosts=1, transport="local", simulated=True)
    prefill, decode, router = units_of(repo, spec, target, python="/venv/bin/python")
    assert (prefill.engine, decode.engine, router.engine) == ("sim", "sim", "sglang-router")
    assert prefill.argv[:9] == [
        "/venv/bin/python", "-m", "reconciler", "sim", "serve",
        "--host", "10.0.0.1", "--port", "8032",
    ]  # fmt: skip
    assert prefill.argv[9] == "--spec-json"
    assert prefill.argv[11:] == ["--bootstrap-port", "8035"]
    assert decode.argv[11:] == []
    sim = SimSpec.model_validate_json(prefill.argv[10])
    assert (sim.role, sim.gpus, sim.served_model, sim.hardware.id) == ("prefill", 2, "chat", "h200")
    assert sim.recipe == spec and sim.model == repo.models["llama-3.1-8b"]
    assert prefill.env == {} and prefill.gpu_indices == [4, 5]
    assert prefill.metrics is not None and prefill.metrics.running == "vllm:num_requests_running"
    assert router.argv[3:12] == [
        "--host", "10.0.0.1", "--port", "8000", "--pd-disaggregation",
        "--prefill", "http://10.0.0.1:8032", "8035", "--decode",
    ]  # fmt: skip


def test_one_simulator_process_stands_for_a_multi_node_replica(repo: Repo) -> None:
    spec = recipe(
        "sglang", "0.5.23", topology={"mode": "aggregated", "gpus": 16, "parallel": {"tp": 16}}
    )
    target = fleet("gb200-nvl72", hosts=2, gpus=8, domain="nvl", simulated=True)
    sim, router = units_of(repo, spec, target, 72)
    assert (sim.name, sim.gpus, sim.gpu_indices, sim.host) == (
        "aggregated-0", 16, list(range(8)), "node-01",
    )  # fmt: skip
    assert SimSpec.model_validate_json(sim.argv[10]).gpus == 16
    assert router.argv[router.argv.index("--worker-urls") + 1] == "http://10.0.0.1:8032"


def test_the_simulator_engine_on_a_real_fleet(repo: Repo) -> None:
    units = units_of(
        repo,
        recipe("sim", "0.1", topology={"mode": "aggregated", "replicas": 2, "gpus": 1}),
        fleet(),
    )
    assert [(u.name, u.engine, u.gpu_indices) for u in units] == [
        ("aggregated-0", "sim", [0]), ("aggregated-1", "sim", [1]), ("router", "sglang-router", []),
    ]  # fmt: skip


def test_router_in_front_of_aggregated_replicas(repo: Repo) -> None:
    spec = recipe("sglang", "0.5.23", topology={"mode": "aggregated", "replicas": 2, "gpus": 4})
    *_, router = units_of(repo, spec, fleet(hosts=1), router_policy="round_robin")
    assert router.argv == [
        "python3", "-m", "sglang_router.launch_router", "--host", "10.0.0.1", "--port", "8000",
        "--worker-urls", "http://10.0.0.1:8032", "http://10.0.0.1:8064",
        "--policy", "round_robin", "--disable-circuit-breaker", "--health-check-interval-secs",
        "10", "--prometheus-host", "10.0.0.1", "--prometheus-port", "8001",
    ]  # fmt: skip
    assert (router.role, router.gpus, router.gpu_indices, router.env) == ("router", 0, [], {})
    assert router.readiness is not None and router.readiness.path == "/readiness"
    assert router.health is not None and router.health.path == "/health"
    assert router.metrics is not None and router.metrics.port == 8001


def test_model_path_replaces_the_weights_reference(repo: Repo) -> None:
    unit = units_of(repo, recipe(), fleet(), model_path="/models/chat")[0]
    assert unit.argv[:5] == ["vllm", "serve", "/models/chat", "--served-model-name", "chat"]
    assert "--revision" not in unit.argv
