"""Models: the one error hierarchy of denv.

The CLI turns a `DenvError` into its message and exit status 1; anything else is a bug
(traceback, exit 3). Expected refusals that callers reason about are data, not exceptions.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class Problem:
    """One finding in one file, printed as `path:line:col: message`."""

    path: str
    line: int
    col: int
    message: str
    warning: bool = False

    def __str__(self) -> str:
        kind = "warning: " if self.warning else ""
        return f"{self.path}:{self.line}:{self.col}: {kind}{self.message}"


class DenvError(Exception):
    """A failure the user can act on; its message is shown as is."""


class SpecError(DenvError):
    """Invalid files: every problem found, not only the first."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = sorted(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


class NotFound(DenvError):
    """A named thing (recipe, fleet, result, row) does not exist."""


class UsageError(DenvError):
    """A command-line value is malformed; the message names the bad part."""


class EngineError(DenvError):
    """A deployment that an engine cannot run as written."""


class UnsupportedSetting(EngineError):
    """An engine-neutral setting (or topology) that this engine version cannot express."""

    def __init__(self, setting: str, value: object, engine: str, reason: str) -> None:
        self.setting = setting
        super().__init__(f"{setting} {value} is not supported on {engine}: {reason}")


class UnknownFlag(EngineError):
    """An extra arg in recipe.args that the engine version does not have, or that denv sets."""


class UnknownVersion(EngineError):
    """An engine version older than every flag table denv has."""


class PlacementError(EngineError):
    """No room on the fleet for a replica."""


class ForgeError(DenvError):
    """The forge (GitHub or the local one) refused or failed a request, after retries."""


class BotBranchTaken(ForgeError):
    """The bot's branch holds commits that are not the bot's: the bot never overwrites them."""


class ParityError(DenvError):
    """A parity suite that could not run to its end: no verdict, and never a pass."""


def failure(exc: BaseException) -> str:
    """Why one fleet's part of a pass failed, as its report says: a DenvError's message, or
    for anything else (a bug, a host's answer no check caught) its kind and text, so the
    other fleets go on and this one is named with its reason."""
    if isinstance(exc, DenvError):
        return str(exc)
    return f"unexpected {type(exc).__name__}: {str(exc)[:300]} (a bug in denv: please report it)"
