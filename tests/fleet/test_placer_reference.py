"""The fleet's placer decides exactly what the placement before it decided (kept verbatim in
reference_placement.py): the same hosts, GPUs and ports for every unit, the same refusals,
the same room left — on generated fleets with shared and split NVLink domains, hosts partly
used by running, departing and foreign units, trial GPUs, taken ports, hosts that did not
answer, and deployments that do not fit."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest

from reconciler.catalog.deployments import Deployment
from reconciler.engines.placement import PORT_BLOCK
from reconciler.engines.units import EngineContext, Unit
from reconciler.errors import DenvError
from reconciler.fleet.drivers.registry import rules_of
from reconciler.fleet.model.labels import DeploymentKey, unit_id
from reconciler.fleet.model.observed import (
    FleetObservation,
    Gpu,
    GpuProcess,
    HostObservation,
    UnitRecord,
)
from reconciler.fleet.placement.placer import FleetPlacer
from reconciler.spec.catalog import Hardware
from reconciler.spec.fleet import Fleet
from reconciler.spec.loader import open_repo
from tests.conftest import ROOT
from tests.engines.conftest import deployment, recipe
from tests.fleet import reference_placement as reference

SEEDS = range(80)


@pytest.fixture(scope="module")
def context() -> EngineContext:
    repo = open_repo(ROOT)
    hardware = repo.resolve_hardware("h200")
    assert isinstance(hardware, Hardware)
    return EngineContext(hardware=hardware, model=repo.models["llama-3.1-8b"])


def generated_fleet(rng: random.Random) -> Fleet:
    hosts: list[dict[str, Any]] = []
    racks_only = rng.random() < 0.3  # where replicas of 8 and 16 GPUs span hosts
    for i in range(rng.randint(2, 12)):
        host: dict[str, Any] = {"name": f"n{i:02d}", "address": f"10.0.0.{i + 1}"}
        shape = rng.choice(["alone", "alone", "split", "rack", "rack", "gateway"])
        shape = "rack" if racks_only and i else shape
        if shape == "gateway" and not any(h["gpus"] == 0 for h in hosts):
            host["gpus"] = 0
        elif shape == "rack":
            host |= {"gpus": rng.choice([2, 4]), "domain": rng.choice(["rack-a", "rack-b"])}
        else:  # a host of 16 is two domains when the domain size is 8
            host["gpus"] = 16 if shape == "split" else rng.choice([2, 4, 8, 8])
        hosts.append(host)
    return Fleet.model_validate(
        {
            "name": "test",
            "provider": "test",
            "hardware": "h200",
            "simulated": True,
            "ssh": {"user": "denv"},
            "hosts": hosts,
            "trial_gpus": min(rng.choice([0, 0, 1, 3, 8]), sum(h["gpus"] for h in hosts)),
        }
    )


def generated_deployments(rng: random.Random) -> list[Deployment]:
    found = []
    for i in range(rng.randint(3, 12)):
        if rng.random() < 0.25:
            topology: dict[str, Any] = {
                "mode": "disaggregated",
                "prefill": {"replicas": rng.randint(1, 3), "gpus": 1, "parallel": {"tp": 1}},
                "decode": {"replicas": rng.randint(1, 2), "gpus": 2, "parallel": {"tp": 2}},
            }
        else:
            gpus = rng.choice([1, 1, 2, 2, 4, 8, 16])
            topology = {"mode": "aggregated", "replicas": rng.randint(1, 4), "gpus": gpus}
        spec = deployment(recipe(topology=topology))
        found.append(spec.model_copy(update={"release": f"r{i:02d}"}))
    return found


def record(rng: random.Random, id: str, gpus: list[int], **labels: str) -> UnitRecord:
    port = rng.choice([None, 8000 + PORT_BLOCK * rng.randint(0, 12)])
    taken = tuple(sorted(rng.sample(gpus, min(len(gpus), rng.choice([1, 1, 2, 4])))))
    return UnitRecord(
        id=id, digest="d", port=port, gpus=taken, alive=rng.random() < 0.8, labels=labels
    )


def generated_observation(
    rng: random.Random, fleet: Fleet, deployments: list[Deployment]
) -> FleetObservation | None:
    if rng.random() < 0.2:
        return None  # planned on the hosts as declared
    found = FleetObservation(fleet.name)
    for host in fleet.hosts:
        if rng.random() < 0.1:
            found.errors[host.name] = "timed out"
            continue
        present = [i for i in range(host.gpus) if rng.random() > 0.05]
        gpus = tuple(
            Gpu(index=i, processes=(GpuProcess(pid=9),) if rng.random() < 0.1 else ())
            for i in present
        )
        units = []
        for spec in deployments:  # replicas of this pass's deployments that run here
            if present and rng.random() < 0.15:
                role, pool = rng.choice(list(spec.recipe.topology.pools()))
                name = f"{role}-{rng.randrange(pool.replicas)}"
                labels = {"release": spec.release, "stage": spec.stage, "fleet": fleet.name}
                units.append(record(rng, unit_id(*_key(spec), name), present, **labels))
                if rng.random() < 0.5:
                    router = unit_id(*_key(spec), "router")
                    port = 8000 + PORT_BLOCK * rng.randint(0, 6)
                    units.append(
                        UnitRecord(
                            id=router,
                            digest="d",
                            port=port,
                            alive=True,
                            labels=labels | {"role": "router"},
                        )
                    )
        for release in ("gone", "kept"):  # a departing release's units free their GPUs
            if present and rng.random() < 0.3:
                labels = {"release": release, "stage": "canary", "fleet": fleet.name}
                units.append(record(rng, f"{release}.canary.test.aggregated-0", present, **labels))
        if present and rng.random() < 0.2:  # something denv did not start
            units.append(record(rng, "foreign", present))
        listening = tuple(8000 + rng.randrange(0, 400) for _ in range(rng.randint(0, 4)))
        found.hosts[host.name] = HostObservation(
            host=host.name, source="simulated", gpus=gpus, units=tuple(units), listening=listening
        )
    return found


def _key(spec: Deployment) -> DeploymentKey:
    return (spec.release, spec.stage, spec.fleet)


def outcome(placer: Any, spec: Deployment, context: EngineContext) -> list[Unit] | str:
    try:
        units: list[Unit] = placer.add(spec, context)
        return units
    except DenvError as exc:
        return f"{type(exc).__name__}: {exc}"


def test_the_placer_decides_what_the_reference_decided(context: EngineContext) -> None:
    seen: Counter[str] = Counter()
    for seed in SEEDS:
        rng = random.Random(seed)
        fleet = generated_fleet(rng)
        specs = generated_deployments(rng)
        observation = generated_observation(rng, fleet, specs)
        wanted = {_key(s) for s in specs} | {("kept", "canary", "test")}
        size = rng.choice([8, 16])
        args = (fleet, size, observation, wanted.__contains__, 8000, rules_of(fleet))
        placer, before = FleetPlacer(*args), reference.FleetPlacer(*args)
        for spec in specs:
            placed, expected = outcome(placer, spec, context), outcome(before, spec, context)
            assert placed == expected, f"seed {seed}, {spec.release}"
            if isinstance(expected, str):
                seen["refused"] += 1
                continue
            seen["placed"] += 1
            seen["multi-node"] += any(u.gpus > len(u.gpu_indices) > 0 for u in expected)
            seen["moved ports"] += expected[-1].port != 8000  # the router's, at the base
        sizes = {1, 2, 4, 8, 16}
        assert (placer.room(sizes), placer.gpus) == (before.room(sizes), before.gpus), seed
        seen["trial"] += fleet.trial_gpus > 0
        seen["observed"] += observation is not None
    # every case the generator means to cover came up
    covered = ("refused", "placed", "multi-node", "moved ports", "trial", "observed")
    assert all(seen[k] > 0 for k in covered), seen
