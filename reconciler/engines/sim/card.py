"""Pure logic: the engine card of denv's simulator (`engine: sim`, and every recipe on a
simulated fleet) — the `denv sim serve` argv builder (argv.py); it takes any version and any
args, has no image (it runs in the bot's own environment), serves vLLM's metric names and
schedules like vLLM (both asked of vLLM's card through the registry, `MODELLED`), and speaks
SGLang's bootstrap protocol to sglang-router in P/D."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from reconciler.engines.base import FlagTable, health
from reconciler.engines.cards import card
from reconciler.engines.model.levers import Limits
from reconciler.engines.router import SGLANG_ROUTER, sglang_pd_routes
from reconciler.engines.sim.argv import MODELLED, units
from reconciler.errors import EngineError
from reconciler.spec.catalog import Hardware
from reconciler.spec.recipe import Recipe, Settings

__all__ = ["health", "pd_routes", "units"]

TABLES: Mapping[str, frozenset[str]] = {}  # any version; args are not checked
MANAGED: Mapping[str, str] = {}
IMAGE: str | None = None
EXTRA_INDEX: tuple[str, ...] = ()
BUILDS: dict[str, tuple[str, tuple[str, ...]]] = {}
SCRIPTS: dict[tuple[str, ...], tuple[str, ...]] = {}
PD_ROUTER = SGLANG_ROUTER
pd_routes = sglang_pd_routes
ALARM_SERIES = card(MODELLED).ALARM_SERIES


def sim_limits(settings: Settings, hardware: Hardware, args: Sequence[str]) -> Limits:
    return card(MODELLED).sim_limits(settings, hardware, args)


def table(version: str) -> FlagTable:
    raise EngineError(f"the simulator has no flag tables (sim {version} takes any flag)")


def check_hardware(recipe: Recipe, hardware: Hardware) -> None:
    """The simulator runs on any hardware: it only models it."""


def check_recipe(recipe: Recipe, largest_host: int) -> None:
    """The simulator runs every recipe."""
