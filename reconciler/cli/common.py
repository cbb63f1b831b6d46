"""CLI helpers shared by the command modules: the repo option, loading, output."""

from __future__ import annotations

import gc
import json
import os
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import BaseModel
from rich.table import Table
from rich.text import Text

from reconciler.cli import terminal
from reconciler.collector import collector_paused
from reconciler.errors import SpecError, UsageError
from reconciler.shown import json_escaped
from reconciler.spec.base import parse_duration
from reconciler.spec.loader import open_repo
from reconciler.spec.parsecache import ParseCache
from reconciler.spec.repo import Repo
from reconciler.spec.sources import find_root

RepoOption = Annotated[
    Path,
    typer.Option(
        "--repo",
        help="A denv repository (default: the one around the current folder).",
        envvar="DENV_REPO",
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]

# stdout's console: tables, and lines with text from hosts, engines and files
# (reconciler/cli/terminal.py: markup off, escapes and control characters never shown)
console = terminal.console()


def print_table(table: Table) -> None:
    """A table on stdout; one with no rows is its title and `none` (a header with nothing
    under it reads as output cut short)."""
    if table.row_count:
        console.print(table)
        return
    if table.title:
        console.print(Text(str(table.title)))
    console.print(Text(" none"))


def cache_root() -> Path:
    """Where denv keeps what it can make again: $DENV_CACHE, else $XDG_CACHE_HOME/denv, else
    ~/.cache/denv."""
    if denv_cache := os.environ.get("DENV_CACHE"):
        return Path(denv_cache)
    base = os.environ.get("XDG_CACHE_HOME")
    return (Path(base) if base else Path.home() / ".cache") / "denv"


def open_checked(repo: Path, rev: str | None = None, only: tuple[str, ...] | None = None) -> Repo:
    """The repository around `repo` with every problem: the spec's checks, and the engines'
    (a version denv has no flag table for, args it would refuse), which the spec layer
    cannot know. YAML files parsed by an earlier command are not parsed again
    (reconciler/spec/parsecache.py). `only`: the files to read (reconciler/spec/loader.py)."""
    cache = ParseCache(cache_root() / "parsed")
    # The repository lives as long as the command: the collector's passes need not walk its
    # few hundred thousand objects again (a third of a ranking's time went to them). They
    # are freed as ever when no longer referred to; only reference cycles among them would
    # stay, and the models, lists and dicts of a repository have none. Frozen before the
    # collector runs again: its first pass over the new objects took a tenth of a load.
    with collector_paused():
        loaded = open_repo(find_root(repo), rev, cache=cache, only=only)
        if loaded.recipes or loaded.releases:  # what the engines judge; their tables on use
            from reconciler.engines.recipe_args import check_engines

            loaded.problems.extend(check_engines(loaded))
        gc.freeze()
    return loaded


def load(repo: Path, rev: str | None = None, only: tuple[str, ...] | None = None) -> Repo:
    """A valid repository, or SpecError with every problem (of the files read: `only`)."""
    loaded = open_checked(repo, rev, only)
    if loaded.errors:
        raise SpecError(loaded.problems)
    return loaded


def seconds(option: str, text: str) -> float:
    """A duration option ('90s', '15m') in seconds; UsageError naming the option."""
    try:
        return float(parse_duration(text))
    except ValueError as exc:
        raise UsageError(f"{option}: {exc}") from None


def print_json(value: Any) -> None:
    if isinstance(value, BaseModel):
        text = value.model_dump_json(indent=2)
    else:
        text = json.dumps(value, indent=2, default=str)
    typer.echo(json_escaped(text))


def show(value: float | int | str | None, digits: int = 2) -> str:
    """A figure for a table; '…' where the source does not give it."""
    if value is None:
        return "…"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    if isinstance(value, int):
        return f"{value:,}"
    return value
