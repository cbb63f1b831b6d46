"""Models: the fleet-kind registry — every kind of fleet denv runs engines on, by the name a
fleet file gives in `transport`, with the module of its card, the model of its settings block
and its checks of a fleet file.

Like the engine registry (reconciler/spec/engines.py), this is names and module paths, and it
sits in spec, the lowest layer, because the spec is where a transport is first read: a fleet
file's `transport` is checked against these names, its kind's block (the key named after the
kind: `slurm:`) is read with the kind's settings model, and the JSON schema lists both, without
importing the fleet layer. The fleet layer turns a name into its card
(`reconciler.fleet.kinds.cards.card`), importing the card module the first time it is asked
for: the card holds what the kind does (its driver, how a unit runs there, one job per replica
or not).

Adding a kind of fleet (docs/architecture.md): its card (`reconciler/fleet/kinds/<name>.py`,
the parts `reconciler.fleet.kinds.cards.FleetCard` names, its driver among them), its settings
model and checks, and one line here. Nothing else names fleet kinds.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from reconciler.spec.base import Spec
from reconciler.spec.kindsettings import SlurmSettings, check_local, check_slurm, check_ssh

if TYPE_CHECKING:  # types only: the fleet model reads this registry
    from reconciler.spec.fleet import Fleet


class FleetKind(NamedTuple):
    card: str  # the module of the kind's card
    # The model of the kind's block in a fleet file, the key named after the kind (`slurm:`);
    # a fleet of the kind must have it, a fleet of another kind may not. None: no block.
    settings: type[Spec] | None = None
    # Checks of a whole fleet file of the kind (field_error naming the field it refuses).
    check: Callable[[Fleet], None] | None = None


# name -> its kind. The order is the order kinds are listed in (schemas, messages).
FLEET_KINDS: dict[str, FleetKind] = {
    "local": FleetKind("reconciler.fleet.kinds.local", None, check_local),
    "ssh": FleetKind("reconciler.fleet.kinds.ssh", None, check_ssh),
    "slurm": FleetKind("reconciler.fleet.kinds.slurm", SlurmSettings, check_slurm),
}


def kind_names() -> tuple[str, ...]:
    """Every registered fleet kind's name, in the registry's order."""
    return tuple(FLEET_KINDS)


def blocks() -> dict[str, type[Spec]]:
    """The settings blocks of the registered kinds, by their key in a fleet file."""
    return {name: kind.settings for name, kind in FLEET_KINDS.items() if kind.settings}
