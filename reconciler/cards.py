"""Pure logic: plug-in cards — a module a registry names by its path (an engine's, a fleet
kind's), imported the first time it is asked for and checked against the protocol of its kind
of card, whose parts are its public names (constants as read-only properties)."""

from __future__ import annotations

import importlib
from types import ModuleType


def missing_parts(module: object, protocol: type) -> list[str]:
    """The parts of `protocol` that `module` lacks, in the protocol's order."""
    wanted = [name for name in vars(protocol) if not name.startswith("_")]
    return [name for name in wanted if not hasattr(module, name)]


def load_card(path: str, protocol: type) -> tuple[ModuleType, list[str]]:
    """The card module at `path`, with the parts of `protocol` it lacks (none: a card)."""
    module = importlib.import_module(path)
    return module, missing_parts(module, protocol)
