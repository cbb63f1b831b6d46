"""Fixtures for the engine tests: the repository's catalog, and small fleet, recipe and
deployment builders."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.catalog.deployments import Deployment
from reconciler.engines.units import EngineContext, Unit
from reconciler.fleet.drivers.registry import rules_of
from reconciler.fleet.render import render
from reconciler.spec.catalog import Hardware
from reconciler.spec.fleet import Fleet
from reconciler.spec.loader import open_repo
from reconciler.spec.recipe import Recipe
from reconciler.spec.repo import Repo
from tests.conftest import ROOT


@pytest.fixture(scope="session")
def repo() -> Repo:
    loaded = open_repo(ROOT)
    assert not loaded.errors, loaded.errors
    return loaded


def fleet(
    hardware: str = "h200",
    hosts: int = 2,
    gpus: int = 8,
    *,
    domain: str | None = None,
    transport: str = "ssh",
    trial: int = 0,
    simulated: bool = False,
    name: str = "test",
) -> Fleet:
    """`hosts` hosts of `gpus` GPUs at 10.0.0.1…, sharing one NVLink domain if `domain`."""
    return Fleet.model_validate(
        {
            "name": name,
            "provider": "test",
            "hardware": hardware,
            "transport": transport,
            "ssh": {"user": "denv"} if transport == "ssh" else None,
            "hosts": [
                {"name": f"node-{i + 1:02d}", "address": f"10.0.0.{i + 1}", "gpus": gpus}
                | ({"domain": domain} if domain else {})
                for i in range(hosts)
            ],
            "trial_gpus": trial,
            "simulated": simulated,
        }
    )


def recipe(
    engine: str = "vllm",
    version: str = "0.33.0",
    *,
    topology: dict[str, Any] | None = None,
    settings: dict[str, Any] | None = None,
    args: list[str] | None = None,
    model: str = "llama-3.1-8b",
    hardware: str = "h200",
) -> Recipe:
    topology = dict(topology or {"mode": "aggregated", "gpus": 1})
    if topology["mode"] == "aggregated":
        topology.setdefault("parallel", {"tp": topology["gpus"]})
    return Recipe.model_validate(
        {
            "id": f"{model}/{engine}@1",
            "model": model,
            "engine": {"name": engine, "version": version},
            "hardware": [hardware],
            "topology": topology,
            "settings": settings or {},
            "args": args or [],
        }
    )


def deployment(spec: Recipe, fleet_name: str = "test") -> Deployment:
    return Deployment(
        release="chat",
        stage="canary",
        fleet=fleet_name,
        served_model="chat",
        weights="hf://org/model@0123abc",
        recipe=spec,
    )


def units_of(
    repo: Repo, spec: Recipe, target: Fleet, domain_size: int = 8, **context: Any
) -> list[Unit]:
    hardware = repo.resolve_hardware(target.hardware)
    assert isinstance(hardware, Hardware)
    ctx = EngineContext(hardware=hardware, model=repo.models.get(spec.model), **context)
    return render(deployment(spec, target.name), target, domain_size, ctx, rules_of(target))
