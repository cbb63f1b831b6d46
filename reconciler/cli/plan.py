"""CLI: `denv plan` — what the reconciler would do now: the desired state from git, what the
fleets run, and the difference as actions."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.text import Text

from reconciler.cli import terminal
from reconciler.cli.common import JsonOption, cache_root, console, print_json
from reconciler.fleet.drivers.registry import Drivers
from reconciler.forge.comments import render
from reconciler.reconcile.plan import Plan
from reconciler.reconcile.render import plan_view, render_text
from reconciler.reconcile.snapshot import snapshot
from reconciler.reconcile.source import GitSource

LocationOption = Annotated[
    str,
    typer.Option(
        "--repo",
        help="A denv repository in git: a path (default: the one around the current folder) "
        "or a URL, cloned into the cache ($DENV_CACHE, else ~/.cache/denv) and fetched.",
        envvar="DENV_REPO",
    ),
]
RevOption = Annotated[
    str | None,
    typer.Option(
        "--rev",
        help="Revision to plan at (default: HEAD of a path, the default branch of a URL). "
        "Committed files only.",
    ),
]
MarkdownOption = Annotated[
    bool, typer.Option("--markdown", help="Print the plan as a pull-request comment.")
]

STYLES = {"+": "green", "~": "yellow", "-": "red"}


def cache_dir() -> Path:
    return cache_root() / "repos"


def _warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)


def plan(
    repo: LocationOption = ".",
    rev: RevOption = None,
    as_json: JsonOption = False,
    markdown: MarkdownOption = False,
) -> None:
    """What would start, stop and be replaced: desired state from git, observed from the
    fleets the releases use (`+` start, `~` replace, `-` stop). Exit 1 when a host did not
    answer, or a file at the commit is invalid: the plan leaves out what runs there, or what
    the file holds."""
    progress = terminal.console(stderr=True)
    source = GitSource(repo, cache_dir())
    drivers = Drivers(warn=_warn)
    try:
        with progress.status("planning") as shown:
            result = snapshot(source, drivers, rev, lambda m: shown.update(m)).plan
    finally:
        drivers.close()
    if rev is None:
        result = _with_worktree(source, result, progress)
    if as_json:
        print_json(result)
    elif markdown:
        typer.echo(render(plan_view(result)), nl=False)
    elif console.is_terminal:
        for line in render_text(result).splitlines():
            style = STYLES.get(line.strip()[:1], "bold" if " — GPUs " in line else "")
            console.print(Text(line, style=style), soft_wrap=True)
    else:
        typer.echo(render_text(result), nl=False)
    if result.unreachable or result.uncommitted_errors or result.invalid_files:
        raise typer.Exit(1)


SHOWN_PATHS = 10  # uncommitted paths named in the warning; the rest counted


def _with_worktree(source: GitSource, result: Plan, progress: terminal.ShownConsole) -> Plan:
    """The plan, with the paths where the work tree differs from the commit planned and the
    errors of those files, both said on stderr: a plan of HEAD leaves an edit out."""
    differs = source.uncommitted()
    if not differs:
        return result
    errors = tuple(str(problem) for problem in source.worktree_problems())
    named = ", ".join(differs[:SHOWN_PATHS])
    more = f" and {len(differs) - SHOWN_PATHS} more" if len(differs) > SHOWN_PATHS else ""
    warning = (
        f"warning: the work tree differs from HEAD ({result.head[:12]}): {named}{more}. "
        "This plan is of the commit: commit the changes to plan them."
    )
    progress.print(Text(warning, style="bold yellow"), soft_wrap=True)
    if errors:
        heading = "error: the uncommitted files do not validate (a commit of them is refused):"
        progress.print(Text(heading, style="bold red"), soft_wrap=True)
        for line in errors:
            progress.print(Text(f"  {line}"), soft_wrap=True)
    return result.model_copy(update={"uncommitted": tuple(differs), "uncommitted_errors": errors})
