"""A `/denv` command from outside the package: `/denv hello` sets a `denv hello` check on the
head it was given on. tests/pr/test_command_registry.py registers it by one entry in
`COMMANDS`, as a new command in reconciler/pr/ would be."""

from __future__ import annotations

from reconciler.forge.models import CheckRun, Conclusion
from reconciler.pr.command import CommandContext, PrCommand


def _run(run: CommandContext) -> CheckRun:
    run.status(f"saying hello to #{run.number}")
    check = CheckRun(
        name="denv hello",
        title=f"hello, #{run.number}",
        summary=f"said hello to {run.head}",
        conclusion=Conclusion.SUCCESS,
    )
    run.forge.set_check(run.head, check)
    return check


HELLO = PrCommand(help="say hello (a check on the head)", run=_run)
