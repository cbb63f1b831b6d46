"""Every recipe of the repository rendered on its own engine, and on the other engine where
the engine-neutral settings allow, compared with golden files; every flag denv writes is
one the engine version has, with a value it accepts, and one recipe.args may not pass."""

from __future__ import annotations

import math
from typing import Any

import pytest

from reconciler.engines.sglang import argv as sglang
from reconciler.engines.units import Unit
from reconciler.engines.vllm import argv as vllm
from reconciler.errors import EngineError
from reconciler.spec.fleet import Fleet
from reconciler.spec.recipe import EngineRef, Recipe, total_gpus
from reconciler.spec.repo import Repo
from tests.conftest import ROOT
from tests.engines.conftest import fleet, units_of
from tests.engines.golden import GOLDEN, check_golden

RECIPES = sorted(
    str(p.relative_to(ROOT / "recipes").with_suffix("")) for p in (ROOT / "recipes").rglob("*.yaml")
)
NEWEST = {"vllm": "0.33.0", "sglang": "0.5.23"}
OTHER = {"vllm": "sglang", "sglang": "vllm"}
TABLES = {"vllm": vllm.table, "sglang": sglang.table}
MANAGED = {"vllm": vllm.MANAGED, "sglang": sglang.MANAGED}
# Fields a golden file keeps: where each unit runs and exactly what it runs.
KEPT = ("name", "role", "replica", "node", "engine", "host", "gpu_indices", "port", "env", "argv")


def golden_fleet(repo: Repo, spec: Recipe) -> Fleet:
    """Enough hosts of the recipe's first hardware: 8-GPU servers, or 4-GPU trays sharing
    one NVLink domain on rack-scale hardware."""
    hardware = repo.resolve_hardware(spec.hardware[0])
    assert hardware is not None
    rack = hardware.scale_up.domain > 8
    per_host = 4 if rack else hardware.scale_up.domain
    hosts = math.ceil(total_gpus(spec.topology) / per_host)
    return fleet(hardware.id, hosts, per_host, domain="rack-1" if rack else None)


def golden_units(repo: Repo, spec: Recipe) -> list[Unit]:
    target = golden_fleet(repo, spec)
    hardware = repo.resolve_hardware(target.hardware)
    assert hardware is not None
    return units_of(repo, spec, target, hardware.scale_up.domain)


def rendered(repo: Repo, spec: Recipe) -> dict[str, Any]:
    target = golden_fleet(repo, spec)
    head = {"recipe": spec.id, "engine": f"{spec.engine.name} {spec.engine.version}"}
    head["fleet"] = f"{len(target.hosts)} × {target.hosts[0].gpus} {target.hardware}"
    try:
        units = golden_units(repo, spec)
    except EngineError as exc:
        return head | {"refused": str(exc)}
    return head | {"units": [unit.model_dump(mode="json", include=set(KEPT)) for unit in units]}


def golden_name(recipe_id: str) -> str:
    return recipe_id.replace("/", "__") + ".json"


@pytest.mark.parametrize("recipe_id", RECIPES)
def test_recipe_on_its_engine(repo: Repo, recipe_id: str) -> None:
    spec = repo.recipes[recipe_id]
    result = rendered(repo, spec)
    assert "units" in result, result.get("refused")
    check_golden(golden_name(recipe_id), result)


@pytest.mark.parametrize("recipe_id", RECIPES)
def test_recipe_on_the_other_engine(repo: Repo, recipe_id: str) -> None:
    spec = repo.recipes[recipe_id]
    other = OTHER[spec.engine.name]
    swapped = spec.model_copy(update={"engine": EngineRef(name=other, version=NEWEST[other])})
    check_golden("cross/" + golden_name(recipe_id), rendered(repo, swapped))


def test_no_stale_golden_files() -> None:
    wanted = {golden_name(r) for r in RECIPES}
    for folder in (GOLDEN, GOLDEN / "cross"):
        found = {p.name for p in folder.glob("*.json")}
        assert found <= wanted, sorted(found - wanted)


def _engine_flags(unit: Unit) -> list[tuple[str, str | None]]:
    """(flag, the token after it) for every flag in an engine unit's argv, after its
    command (`vllm serve MODEL`, `python -m sglang.launch_server`)."""
    argv = unit.argv[3:]
    return [
        (token, argv[i + 1] if i + 1 < len(argv) else None)
        for i, token in enumerate(argv)
        if token.startswith("-") and not token[1:2].isdigit()
    ]


@pytest.mark.parametrize("recipe_id", RECIPES)
@pytest.mark.parametrize("swap", [False, True], ids=["own", "other"])
def test_every_flag_is_known_to_the_version(repo: Repo, recipe_id: str, swap: bool) -> None:
    spec = repo.recipes[recipe_id]
    if swap:
        other = OTHER[spec.engine.name]
        spec = spec.model_copy(update={"engine": EngineRef(name=other, version=NEWEST[other])})
    table = TABLES[spec.engine.name](spec.engine.version)
    try:
        units = golden_units(repo, spec)
    except EngineError:
        return
    for unit in units:
        if unit.engine not in TABLES:
            continue
        for flag, value in _engine_flags(unit):
            assert table.has(flag), f"{unit.name}: {flag} is not a flag of {table.label}"
            # the repository's recipes pass no args: every flag here is one denv writes, so
            # recipe.args may not pass it (MANAGED is what validate and rendering refuse)
            assert flag in MANAGED[unit.engine], f"{unit.name}: {flag} is not in MANAGED"
            allowed = table.choices.get(flag)
            assert allowed is None or value in allowed, f"{unit.name}: {flag} {value}"
