"""Composition: `/denv` comment commands, run once each, dispatched from `COMMANDS`. The
forge says which comments are commands from users who may give them (write permission;
forge/commands.py parses them); the bot's commands comment (forge/handled.py) says which have
run. New ones are claimed in that comment before they run, so a second CI run started
meanwhile, or one that dies halfway, never runs them again; then each named command runs
(once, however many comments asked) and the comment says what came of it. `denv pr commands`
uses it.

A name `COMMANDS` lacks is refused, with the names it has, and runs nothing. Each command
runs on the commit it was given on: one whose commit is no longer the head is refused, naming
both (commands.head_moved); the others run pinned to that head, so a push while they start
stops them rather than running on a commit nobody asked for.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from reconciler.errors import DenvError
from reconciler.fleet.drivers.registry import Drivers
from reconciler.forge.commands import head_moved
from reconciler.forge.comments import post
from reconciler.forge.handled import Handled, pending, read_handled
from reconciler.forge.kinds.commands import CommandsView
from reconciler.forge.models import CheckRun, CommentCommand
from reconciler.forge.protocol import Forge
from reconciler.pr.bench import BenchOptions
from reconciler.pr.bench_command import BENCH
from reconciler.pr.command import CommandContext, PrCommand
from reconciler.pr.plan_command import PLAN

RUNNING = "running"
# `/denv NAME` -> the command it runs: a new command is its module and one entry here
COMMANDS: dict[str, PrCommand] = {"plan": PLAN, "bench": BENCH}


def unknown(name: str) -> str | None:
    """Why `/denv NAME` may not run because there is no such command; None when there is."""
    if name in COMMANDS:
        return None
    known = ", ".join(f"`/denv {known}`" for known in COMMANDS)
    return f"refused: denv has no command `{name}`; it understands {known}"


@dataclass(frozen=True)
class CommandsRun:
    ran: list[Handled]  # the commands this run took up, with what came of them
    checks: list[CheckRun]  # the checks the runs set

    def as_json(self) -> dict[str, object]:
        return {
            "ran": [h.model_dump(mode="json") for h in self.ran],
            "checks": [c.model_dump(mode="json") for c in self.checks],
        }


def _claimed(command: CommentCommand) -> Handled:
    return Handled(
        comment_id=command.comment_id, user=command.user, command=command.command, outcome=RUNNING
    )


def _outcome(check: CheckRun) -> str:
    return f"check '{check.name}' {check.conclusion}: {check.title}"


def run_commands(
    forge: Forge,
    root: Path,
    number: int,
    drivers: Drivers,
    options: BenchOptions,
    only: int | None = None,
    status: Callable[[str], None] = lambda message: None,
    *,
    cache: Path,
) -> CommandsRun:
    """Run the commands on pull request `number` that have not run yet (with `only`, just
    that comment's), and record them in the bot's commands comment."""
    handled = read_handled(forge.own_comments(number))  # a pasted marker is not the bot's
    todo = pending(forge.comment_commands(number), handled, only)
    if not todo:
        return CommandsRun([], [])
    post(forge, number, CommandsView(handled=[*handled, *map(_claimed, todo)]))
    head = forge.pull_request(number).head_sha
    refused = {
        c.comment_id: why
        for c in todo
        if (why := unknown(c.command) or head_moved(c, head)) is not None
    }
    context = CommandContext(forge, root, number, head, drivers, options, status, cache)
    outcomes: dict[str, str] = {}
    checks: list[CheckRun] = []
    for name in dict.fromkeys(c.command for c in todo if c.comment_id not in refused):
        status(f"/denv {name} on #{number} at {head[:12]}")
        try:
            check = COMMANDS[name].run(context)
        except DenvError as exc:
            outcomes[name] = f"failed: {exc}"
            continue
        checks.append(check)
        outcomes[name] = _outcome(check)
    ran = [
        _claimed(c).model_copy(update={"outcome": refused.get(c.comment_id) or outcomes[c.command]})
        for c in todo
    ]
    post(forge, number, CommandsView(handled=[*handled, *ran]))
    return CommandsRun(ran, checks)
