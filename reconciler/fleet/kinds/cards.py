"""Pure logic: fleet-kind cards — what is specific to one kind of fleet, in one module
(`reconciler/fleet/kinds/<name>.py`) — and the lookup from a fleet's `transport` to its card.

A card is a plain module satisfying `FleetCard`: its driver (named, made by
reconciler.fleet.drivers.registry), whether a replica over several hosts is one job, how a
neutral unit (the engine's argv, as if installed) is made runnable on a host of the kind and
where the engine finds its weights there, who trial engines run as, and the kind's part of a
fleet's status. The registry of names, with each kind's settings block and fleet-file checks,
sits in the spec layer (reconciler/spec/fleetkinds.py) so a fleet file is checked without this
layer; a card's module is imported here, the first time its kind is asked for. Code outside
the cards asks `card_of(fleet)`, never branches on a transport's name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, cast, runtime_checkable

from reconciler.cards import Registry
from reconciler.errors import DenvError
from reconciler.spec.fleetkinds import FLEET_KINDS, kind_names

if TYPE_CHECKING:  # types only: cards import the modules that would import this one
    from reconciler.engines.runtime import Runnable
    from reconciler.engines.units import Unit
    from reconciler.fleet.model.observed import FleetObservation
    from reconciler.spec.base import Spec
    from reconciler.spec.catalog import Hardware
    from reconciler.spec.fleet import Fleet


class JobLine(NamedTuple):
    """The command that submits a unit as a job, as `denv recipe render` shows it."""

    key: str  # its name in --json, the command's (`sbatch`)
    argv: list[str]
    note: str = ""  # shown after it, as a comment ("time limit: the partition's default")


@runtime_checkable
class FleetCard(Protocol):
    """The parts of a fleet-kind card. Constants are read-only properties here (a card module
    defines them as module constants)."""

    @property
    def DRIVER(self) -> str:
        """`module:Class` of the kind's driver (reconciler.fleet.drivers.base.FleetDriver),
        imported by the drivers' registry when a fleet of the kind is first driven."""

    @property
    def ONE_JOB_PER_REPLICA(self) -> bool:
        """Whether a replica over several hosts runs as one unit (a scheduler's job over its
        nodes) rather than one process per host that denv starts itself."""

    @property
    def AGENTS_USER(self) -> str | None:
        """Why trial engines that are processes run as the agent's user on this kind ("Slurm
        jobs of the agent's user"); None: they run as the fleet's `trial_user`."""

    def host_runtimes(
        self, fleet: Fleet, hardware: Hardware, observation: FleetObservation | None, home: str
    ) -> Mapping[str, Spec]:
        """host -> how units run there, in the card's own terms (the agent kinds: a
        HostRuntime, with the host's own home; `home`: the kind's default, for hosts not
        observed). Passed back to `runnable`, and compared between passes."""

    def model_path(self, source: str) -> str:
        """Where an engine finds the weights of `source`, as rendered once for every host of
        a deployment (`runnable` makes it the host's own)."""

    def runnable(
        self,
        unit: Unit,
        unit_id: str,
        version: str,
        image: str | None,
        runtime: Spec,
        weights: str | None,
    ) -> Runnable:
        """The neutral unit as a host of the kind runs it, with what must be prepared there
        first (`weights`: the source its engine loads; None: none)."""

    def jobs(self, fleet: Fleet, units: list[Unit], trial: bool) -> dict[str, JobLine]:
        """unit name -> the command that submits it as a job, where the kind runs units as
        a scheduler's jobs (`trial`: a trial's); {}: the agent starts them as processes."""

    def runs_here(self, fleet: Fleet) -> bool:
        """Whether the fleet's agent runs on this machine (asking it dials no host): `denv
        fleet list` asks such fleets for live figures by default."""

    def view(self, fleet: Fleet, seen: FleetObservation) -> dict[str, Any] | None:
        """The kind's own part of the fleet's status, under the kind's name in `denv fleet
        list` and `fleet probe` (--json; a table where the CLI has a printer for it): a Slurm
        fleet's login node, nodes and queue. Its `free_gpus`, where it has one, replaces the
        hosts' count of unused GPUs in the fleet's figures. None: the hosts' rows say it
        all."""


_REGISTRY = Registry("fleet kind", "reconciler/spec/fleetkinds.py", DenvError, FleetCard)


def card(name: str) -> FleetCard:
    """The card of a registered fleet kind (DenvError for a name the registry lacks, or a
    card that lacks a part)."""
    kind = FLEET_KINDS.get(name)
    module = _REGISTRY.load(name, kind.card if kind is not None else None, kind_names())
    return cast(FleetCard, module)  # Registry.load checked every part


def card_of(fleet: Fleet) -> FleetCard:
    """The card of the fleet's kind (its `transport`)."""
    return card(fleet.transport)
