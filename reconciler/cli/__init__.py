"""CLI: the typer app and its one error boundary.

DenvError -> its message on stderr, exit 1; Ctrl-C -> exit 130; anything else is a bug:
traceback, exit 3. Libraries' log records (paramiko logs a traceback for every SSH handshake
that fails) are shown only with `denv --debug`, which also shows where a DenvError came from.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
import traceback
from collections.abc import Mapping, Sequence
from typing import Annotated

import typer
from typer.exceptions import Abort, TyperException

from reconciler.errors import DenvError

# `denv NAME` -> (module of reconciler.cli, attribute, is it a group). Only the module the
# command given needs is imported: an engine simulator (`denv sim serve`, one per unit)
# starts without loading the optimizer, the forge and the bench; `denv --help` loads all.
COMMANDS: dict[str, tuple[str, str, bool]] = {
    "validate": ("validate", "validate", False),
    "schema": ("validate", "schema", False),
    "offers": ("offers", "offers", False),
    "plan": ("plan", "plan", False),
    "reconcile": ("reconcile", "reconcile", False),
    "status": ("reconcile", "status", False),
    "deploy": ("deploy", "deploy", False),
    "rollback": ("rollout", "rollback", False),
    "bench": ("bench", "app", True),
    "fleet": ("fleet", "app", True),
    "optimize": ("optimize", "app", True),
    "parity": ("parity", "app", True),
    "pr": ("pr", "app", True),
    "recipe": ("recipe", "app", True),
    "rollout": ("rollout", "app", True),
    "sim": ("sim", "app", True),
    "traffic": ("traffic", "app", True),
}


def build_app(names: list[str] | None = None) -> typer.Typer:
    """The typer app with the commands `names` (default: every one)."""
    app = typer.Typer(
        name="denv",
        no_args_is_help=True,
        pretty_exceptions_enable=False,
        add_completion=False,
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

    for name in names or list(COMMANDS):
        module, attribute, group = COMMANDS[name]
        target = getattr(importlib.import_module(f"reconciler.cli.{module}"), attribute)
        if group:
            app.add_typer(target, name=name)
        else:
            app.command(name)(target)
    return app


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
    debug = debugging(sys.argv[1:], os.environ)
    configure_logging(debug)
    try:
        # standalone_mode=False: click hands exit codes back instead of exiting itself
        given = next((arg for arg in sys.argv[1:] if arg[:1] != "-"), "")
        app = build_app([given] if given in COMMANDS else None)
        code = app(standalone_mode=False)
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
