"""Pure logic: engine cards — everything denv knows about one engine, in one module
(`reconciler/engines/<name>/card.py`) — and the lookup from a registered name to its card.

A card is a plain module satisfying `EngineCard`: its flag tables per version, the argv
builder, its container image and Python module, its router wiring, the metric names the
rollout alarms read, the simulator's profile of it, and the checks the optimizer makes of a
candidate recipe. The registry of names (reconciler/spec/engines.py) sits in the spec layer
so recipes can be checked without this layer; a card's module is imported here, the first
time its engine is asked for. Code outside the cards asks `card(name)` for what it needs of
an engine, never branches on an engine's name.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from reconciler.errors import EngineError
from reconciler.spec.engines import ENGINE_CARDS, engine_names

if TYPE_CHECKING:  # types only: cards import the modules that would import this one
    from reconciler.catalog.deployments import Deployment
    from reconciler.engines.base import FlagTable
    from reconciler.engines.model.levers import Limits
    from reconciler.engines.placement import Placement
    from reconciler.engines.router import Router
    from reconciler.engines.units import EngineContext, EngineSeries, Probe, Unit
    from reconciler.spec.catalog import Hardware
    from reconciler.spec.recipe import Recipe, Settings


@runtime_checkable
class EngineCard(Protocol):
    """The parts of an engine card. Constants are read-only properties here (a card module
    defines them as module constants)."""

    @property
    def TABLES(self) -> Mapping[str, frozenset[str]]:
        """Flags of each known version; empty: any version runs, its args are not checked."""

    @property
    def MANAGED(self) -> Mapping[str, str]:
        """Flags denv sets itself, with the setting that sets them (recipe.args may not)."""

    @property
    def IMAGE(self) -> str | None:
        """The official container image, `{version}` in it; None: no official image."""

    @property
    def EXTRA_INDEX(self) -> tuple[str, ...]:
        """Package indexes a pip install of the engine needs beyond PyPI."""

    @property
    def BUILDS(self) -> Mapping[str, tuple[str, tuple[str, ...]]]:
        """Builds of the engine other than its GPU package, by hardware vendor: (the PyPI
        package, distributions its install pulls in that the build cannot load and the venv
        removes again). A vendor not here installs the engine's own name."""

    @property
    def SCRIPTS(self) -> Mapping[tuple[str, ...], tuple[str, ...]]:
        """Console-script argv prefixes the argv builder writes, and the module form that runs
        them in a venv (`vllm serve` -> `-m vllm.entrypoints.cli.main serve`)."""

    @property
    def PD_ROUTER(self) -> Router:
        """The router in front of prefill/decode pools of this engine."""

    @property
    def ALARM_SERIES(self) -> EngineSeries:
        """Where the engine keeps each alarm metric in its /metrics (the rollout reads it)."""

    def table(self, version: str) -> FlagTable:
        """The flag table of a version (EngineError when there is none)."""

    def units(
        self, deployment: Deployment, placement: Placement, context: EngineContext
    ) -> list[Unit]:
        """The argv builder: every unit (process) of a deployment, router left out."""

    def health(self) -> Probe: ...

    def pd_routes(self, prefill: list[Unit], decode: list[Unit]) -> list[str]:
        """The PD_ROUTER's flags that name the prefill and decode workers."""

    def sim_limits(self, settings: Settings, hardware: Hardware, args: Sequence[str]) -> Limits:
        """The simulator's profile: the scheduler's limits once the engine's defaults fill
        what the recipe leaves out."""

    def check_recipe(self, recipe: Recipe, largest_host: int) -> None:
        """EngineError when the engine version cannot run the recipe's settings, layout and
        args (`largest_host`: the most GPUs on one host of the fleet)."""

    def check_hardware(self, recipe: Recipe, hardware: Hardware) -> None:
        """UnsupportedSetting when the recipe cannot run on this kind of hardware (vLLM's CPU
        build runs one worker a replica; SGLang runs on GPUs only)."""


def missing_parts(module: object) -> list[str]:
    """The parts of EngineCard that `module` lacks, in the protocol's order."""
    wanted = [name for name in vars(EngineCard) if not name.startswith("_")]
    return [name for name in wanted if not hasattr(module, name)]


def card(name: str) -> EngineCard:
    """The card of a registered engine (EngineError for a name the registry lacks, or a
    card that lacks a part)."""
    path = ENGINE_CARDS.get(name)
    if path is None:
        raise EngineError(
            f"engine '{name}' is not registered (reconciler/spec/engines.py lists "
            f"{', '.join(engine_names())})"
        )
    module: ModuleType = importlib.import_module(path)
    if not isinstance(module, EngineCard):
        missing = ", ".join(missing_parts(module))
        raise EngineError(f"the card of engine '{name}' ({path}) lacks {missing}")
    return module


def cards() -> dict[str, EngineCard]:
    """Every registered engine's card, in the registry's order."""
    return {name: card(name) for name in engine_names()}
