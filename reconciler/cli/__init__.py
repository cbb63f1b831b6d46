"""CLI: the typer app and its one error boundary.

DenvError -> its message on stderr, exit 1; Ctrl-C -> exit 130; anything else is a bug:
traceback, exit 3. What it writes, and what the commands write, goes through the terminal
boundary (reconciler/cli/streams.py, terminal.py): text from hosts and engines is shown, never
interpreted. Libraries' log records (paramiko logs a traceback for every SSH handshake
that fails) are shown only with `denv --debug`, which also shows where a DenvError came from.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
import traceback
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Annotated

import typer
import typer.main
from typer.core import TyperOption
from typer.exceptions import Abort, TyperException

from reconciler.cli import streams

if TYPE_CHECKING:
    from typer._click.core import Command
from reconciler.errors import DenvError

# `denv NAME` -> (module of reconciler.cli, attribute, is it a group). Only the module the
# command given needs is imported: an engine simulator (`denv sim serve`, one per unit)
# starts without loading the optimizer, the forge and the bench, and `denv --help` loads
# none (it lists SUMMARIES; tests/cli/test_startup.py keeps both in step).
COMMANDS: dict[str, tuple[str, str, bool]] = {
    "validate": ("validate", "validate", False),
    "schema": ("validate", "schema", False),
    "offers": ("offers", "offers", False),
    "plan": ("plan", "plan", False),
    "reconcile": ("reconcile", "reconcile", False),
    "status": ("reconcile", "status", False),
    "deploy": ("deploy", "deploy", False),
    "rollback": ("rollout", "rollback", False),
    "prune": ("prune", "prune", False),
    "bench": ("bench", "app", True),
    "fleet": ("fleet", "app", True),
    "optimize": ("optimize", "app", True),
    "parity": ("parity", "app", True),
    "pr": ("pr", "app", True),
    "recipe": ("recipe", "app", True),
    "rollout": ("rollout", "app", True),
    "sim": ("sim", "app", True),
    "traffic": ("traffic", "app", True),
    "ui": ("ui", "ui", False),
}
# What `denv --help` says of each command: the one line it lists, also given to the command
# itself, so the listing with and without the module loaded is the same.
SUMMARIES: dict[str, str] = {
    "validate": "Check every denv file and the references between them.",
    "schema": "JSON Schema of every file kind (for editors).",
    "offers": "Where to get HARDWARE, cheapest first.",
    "plan": "What would start, stop and be replaced on the fleets.",
    "reconcile": "Make the fleets run what git says.",
    "status": "Per release, stage and fleet: desired and running revision, drift.",
    "deploy": "Deploy a benchmark result or a recipe as a release, in a pull request.",
    "rollback": "Roll a stage back to its last good revision, by hand.",
    "prune": "Stop the units denv started that git no longer has (orphans).",
    "bench": "Rank benchmark results; show one; compare two; run one.",
    "fleet": "Fleets: hosts, GPUs and what runs there.",
    "optimize": "Search for a faster recipe on the release's own traffic.",
    "parity": "Answer parity: does a candidate answer like the reference?",
    "pr": "Pull requests on the local forge: comments, checks and approvals.",
    "recipe": "Engine recipes.",
    "rollout": "Stages of a release: bake, alarms, promotion and rollback.",
    "sim": "denv's engine simulator: an OpenAI-compatible server.",
    "traffic": "Traffic shapes: generate workloads, describe a trace, record live traffic.",
    "ui": "The read-only web UI: overview, releases, fleets, results, optimizer.",
}


def build_app(names: list[str] | None = None) -> typer.Typer:
    """The typer app with the commands `names` loaded (default: none, each listed by its
    summary only; enough for `denv --help` and for a command name that does not exist)."""
    app = typer.Typer(
        name="denv",
        no_args_is_help=True,
        pretty_exceptions_enable=False,
        add_completion=False,
        # the bare listing in click's plain format: typer's rich one costs more than typer
        rich_markup_mode=None if names is None else "rich",
    )

    @app.callback()
    def denv(
        debug: Annotated[
            bool,
            typer.Option(
                "--debug",
                envvar="DENV_DEBUG",
                help="Show the libraries' logs and the tracebacks behind errors.",
            ),
        ] = False,
    ) -> None:  # a group even with one command: `denv NAME …` keeps its NAME
        """Run LLM inference fleets from git."""

    for name in COMMANDS:
        summary = SUMMARIES[name]
        if names is None or name not in names:
            app.command(name, short_help=summary, add_help_option=False)(_not_loaded)
            continue
        module, attribute, group = COMMANDS[name]
        target = getattr(importlib.import_module(f"reconciler.cli.{module}"), attribute)
        if group:
            app.add_typer(target, name=name, short_help=summary)
        else:
            app.command(name, short_help=summary)(target)
    return app


def flags_without_values(command: Command) -> Command:
    """`command` and every subcommand, their on/off options (--json, --help, --all) shown in
    help as taking no value: typer writes `<bool>` beside them, as if `--json true` were
    how to give one."""
    for param in command.get_params(typer.Context(command)):  # --help is made (once) here
        if isinstance(param, TyperOption) and param.is_flag:
            param.metavar = ""
    for sub in getattr(command, "commands", {}).values():
        flags_without_values(sub)
    return command


def _not_loaded() -> None:
    raise AssertionError("a command was run without its module: main() loads what it runs")


def command_given(argv: list[str]) -> str | None:
    """The command `argv` names (its first word that is not an option), if it is one."""
    first = next((word for word in argv[1:] if not word.startswith("-")), None)
    return first if first in COMMANDS else None


def debugging(argv: Sequence[str], environ: Mapping[str, str]) -> bool:
    """Whether `denv --debug …` (the option comes before the command) or DENV_DEBUG is set."""
    command = next((i for i, arg in enumerate(argv) if arg[:1] != "-"), len(argv))
    flag = environ.get("DENV_DEBUG", "").lower() in ("1", "true", "yes")
    return flag or "--debug" in argv[:command]


class _Plain(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return f"{record.levelname.lower()}: {record.getMessage()}"


def configure_logging(debug: bool) -> None:
    """denv's own warnings as `warning: …` lines; other loggers' records only with --debug."""
    handler = logging.StreamHandler(sys.stderr)
    if debug:
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        logging.basicConfig(level=logging.DEBUG, handlers=[handler], force=True)
        return
    handler.setFormatter(_Plain())
    handler.addFilter(lambda record: record.name.split(".")[0] == "reconciler")
    logging.basicConfig(level=logging.WARNING, handlers=[handler], force=True)


def main() -> None:
    streams.install()  # everything from here on is shown, never interpreted
    debug = debugging(sys.argv[1:], os.environ)
    configure_logging(debug)
    try:
        # standalone_mode=False: click hands exit codes back instead of exiting itself
        given = command_given(sys.argv)
        command = flags_without_values(
            typer.main.get_command(build_app([given] if given else None))
        )
        code = command(standalone_mode=False)
    except DenvError as exc:
        if debug:
            traceback.print_exc()
        print(str(exc), file=sys.stderr)
        sys.exit(1)
    except (KeyboardInterrupt, Abort):
        sys.exit(130)
    except TyperException as exc:  # usage errors: the parser's own message, exit 2
        show = getattr(exc, "show", None)
        show() if callable(show) else print(exc, file=sys.stderr)
        sys.exit(exc.exit_code)
    except Exception:
        traceback.print_exc()
        print("denv: this is a bug; please report it with the traceback above.", file=sys.stderr)
        sys.exit(3)
    sys.exit(code if isinstance(code, int) else 0)
