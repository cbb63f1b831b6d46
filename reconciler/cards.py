"""Pure logic: plug-in cards — a module a registry names by its path (an engine's, a fleet
kind's), imported the first time it is asked for and checked against the protocol of its kind
of card, whose parts are its public names (constants as read-only properties)."""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from types import ModuleType


def missing_parts(module: object, protocol: type) -> list[str]:
    """The parts of `protocol` that `module` lacks, in the protocol's order."""
    wanted = [name for name in vars(protocol) if not name.startswith("_")]
    return [name for name in wanted if not hasattr(module, name)]


class Registry:
    """Where a kind of card is registered: `what` names one in messages ("engine"), `where`
    is the registry's file, `error` the exception a lookup raises."""

    def __init__(self, what: str, where: str, error: type[Exception], protocol: type) -> None:
        self.what, self.where, self.error, self.protocol = what, where, error, protocol

    def load(self, name: str, path: str | None, names: Sequence[str]) -> ModuleType:
        """The card of `name` at `path` (None: not registered); `error` for a name the
        registry lacks, or a card that lacks a part."""
        if path is None:
            raise self.error(
                f"{self.what} '{name}' is not registered ({self.where} lists {', '.join(names)})"
            )
        module = importlib.import_module(path)
        missing = missing_parts(module, self.protocol)
        if missing:
            raise self.error(
                f"the card of {self.what} '{name}' ({path}) lacks {', '.join(missing)}"
            )
        return module
