"""Composition: what a `/denv` comment command is. A command is one module under
reconciler/pr/ defining a `PrCommand` (a line of help and `run`), and one entry in
`COMMANDS` (pr/commands.py) under the name a comment gives it: `/denv NAME`.

`run` gets the pull request and the commit it runs on (`CommandContext`), does its work, and
returns the check it set; a `DenvError` it raises is recorded as the command's outcome.
Which commands exist is decided by the installed denv (the default branch's, in CI), never
by a pull request's files.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from reconciler.fleet.drivers.registry import Drivers
from reconciler.forge.models import CheckRun
from reconciler.forge.protocol import Forge
from reconciler.pr.bench import BenchOptions


@dataclass(frozen=True)
class CommandContext:
    """What a command runs with: the pull request, pinned to the head it was given on."""

    forge: Forge
    root: Path
    number: int
    head: str  # the pull request's head, which every comment being run was given on
    drivers: Drivers
    options: BenchOptions  # the CLI's bench options (`denv pr commands --workload …`)
    status: Callable[[str], None]
    cache: Path


@dataclass(frozen=True)
class PrCommand:
    help: str  # what it does, in a line: docs/github.md lists it (a test holds them equal)
    run: Callable[[CommandContext], CheckRun]
