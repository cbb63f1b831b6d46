"""A third engine, for tests only: `toyserve`, a made-up engine with one flag table, a console
script, its own P/D router and its own metric names. It is a complete card
(reconciler/engines/cards.py, `EngineCard`) and nothing else in denv names it: a test
registers it by adding one entry to the registry (reconciler/spec/engines.py)."""

from __future__ import annotations

from collections.abc import Sequence

from reconciler.catalog.deployments import Deployment
from reconciler.engines.base import (
    FlagTable,
    check_args,
    flag_tables,
    model_source,
    pick_table,
    visible_devices,
)
from reconciler.engines.model.levers import Limits
from reconciler.engines.placement import HTTP, Placement
from reconciler.engines.replicas import engine_unit
from reconciler.engines.router import Router, worker_url
from reconciler.engines.units import EngineContext, EngineSeries, Probe, Series, Unit
from reconciler.errors import UnsupportedSetting
from reconciler.spec.catalog import Hardware
from reconciler.spec.recipe import Recipe, Settings

TABLES = flag_tables(
    (("1.0", "--host --port --tp --max-batch --verbose", ""), ("1.2", "--fast", ""))
)
MANAGED = {"--host": "placement", "--port": "placement", "--tp": "topology"}
IMAGE = "toy/toyserve:{version}"
EXTRA_INDEX = ("https://toy.example/simple",)
BUILDS: dict[str, tuple[str, tuple[str, ...]]] = {}
SCRIPTS = {("toyserve", "run"): ("-m", "toyserve.cli", "run")}
PD_ROUTER = Router("toy-router", "2.0", "toy_router.main")
ALARM_SERIES = EngineSeries(
    requests=Series("toy:requests_total"),
    metrics={
        "ttft": Series("toy:ttft_seconds"),
        "waiting": Series("toy:waiting"),
        "error_rate": Series("toy:errors_total"),
    },
)
RUNNING = "toy:running"


def table(version: str) -> FlagTable:
    return pick_table("toy", version, TABLES, {})


def health() -> Probe:
    return Probe(path="/ping")


def units(deployment: Deployment, placement: Placement, context: EngineContext) -> list[Unit]:
    recipe = deployment.recipe
    flags = table(recipe.engine.version)
    model, _ = model_source(deployment, context)
    found = []
    for role, pool in recipe.topology.pools():
        for index in range(pool.replicas):
            (slot,) = placement.replica(role, index)
            argv = ["toyserve", "run", model, "--host", slot.address, "--port"]
            argv += [str(slot.at(HTTP)), "--tp", str(pool.parallel.tp)]
            argv += check_args(recipe.args, flags, MANAGED)
            env = visible_devices(context.hardware, slot.gpu_indices)
            found.append(engine_unit("toy", role, slot, argv, env, health(), RUNNING, flags.source))
    return found


def pd_routes(prefill: list[Unit], decode: list[Unit]) -> list[str]:
    return [f"--from={worker_url(u)}" for u in prefill] + [f"--to={worker_url(u)}" for u in decode]


def sim_limits(settings: Settings, hardware: Hardware, args: Sequence[str]) -> Limits:
    return Limits(settings.max_batch or 8, 1024, None, False, 8, 0.0)


def check_recipe(recipe: Recipe, largest_host: int) -> None:
    if recipe.settings.kv_cache.offload != "none":
        raise UnsupportedSetting(
            "settings.kv_cache.offload", recipe.settings.kv_cache.offload, "toy", "no offload"
        )
    check_args(recipe.args, table(recipe.engine.version), MANAGED)


def check_hardware(recipe: Recipe, hardware: Hardware) -> None:
    if hardware.vendor == "cpu":
        raise UnsupportedSetting("hardware", hardware.id, "toy", "GPUs only")
