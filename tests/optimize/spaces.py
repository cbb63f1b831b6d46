"""Search spaces for the optimizer's search tests: over this repository's catalog and recipes,
on a fleet of simulated GPUs that each test describes."""

from __future__ import annotations

from collections.abc import Collection
from functools import cache
from typing import Any

from reconciler.optimize.space import Baseline, SearchSpace
from reconciler.spec.fleet import Fleet, Host
from reconciler.spec.loader import open_repo
from reconciler.spec.policy import OptimizerRules
from reconciler.spec.recipe import AggregatedTopology
from reconciler.spec.repo import Repo
from tests.conftest import ROOT


@cache
def repo() -> Repo:
    """This repository's files, loaded once: the tests only read them."""
    return open_repo(ROOT)


def fleet(hardware: str = "h200", gpus: int = 16, trial_gpus: int = 8, domain: int = 8) -> Fleet:
    return Fleet(
        name="lab",
        provider="local",
        hardware=hardware,
        domain=domain,
        transport="local",
        simulated=True,
        hosts=[Host(name="host", gpus=gpus)],
        trial_gpus=trial_gpus,
    )


def space(
    recipe: str = "llama-3.1-8b/vllm@1",
    *,
    overrides: dict[str, Any] | None = None,
    topology: AggregatedTopology | None = None,
    hardware: str = "h200",
    budget: int = 8,
    levers: Collection[str] | None = None,
    rules: OptimizerRules | None = None,
    on: Fleet | None = None,
) -> SearchSpace:
    loaded = repo()
    base = loaded.recipes[recipe]
    return SearchSpace(
        Baseline(base, overrides or {}, topology),
        hardware=loaded.hardware[hardware],
        model=loaded.models[base.model],
        fleet=on or fleet(hardware),
        domain=(on.domain if on and on.domain else 8),
        budget_gpus=budget,
        rules=rules or OptimizerRules(),
        recipes=loaded.recipes,
        gpu_hour=3.0,
        levers=levers,
    )
