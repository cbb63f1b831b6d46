"""CLI: the typer app and its one error boundary.

DenvError -> its message on stderr, exit 1; Ctrl-C -> exit 130; anything else is a bug:
traceback, exit 3.
"""

from __future__ import annotations

import sys
import traceback

import typer
from typer.exceptions import Abort, TyperException

from reconciler.cli import (
    bench,
    deploy,
    fleet,
    offers,
    optimize,
    parity,
    plan,
    pr,
    recipe,
    reconcile,
    rollout,
    sim,
    traffic,
    validate,
)
from reconciler.errors import DenvError

app = typer.Typer(
    name="denv",
    help="Run LLM inference fleets from git.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
app.command("validate")(validate.validate)
app.command("schema")(validate.schema)
app.command("offers")(offers.offers)
app.command("plan")(plan.plan)
app.command("reconcile")(reconcile.reconcile)
app.command("status")(reconcile.status)
app.command("deploy")(deploy.deploy)
app.command("rollback")(rollout.rollback)
app.add_typer(bench.app, name="bench")
app.add_typer(fleet.app, name="fleet")
app.add_typer(optimize.app, name="optimize")
app.add_typer(parity.app, name="parity")
app.add_typer(pr.app, name="pr")
app.add_typer(recipe.app, name="recipe")
app.add_typer(rollout.app, name="rollout")
app.add_typer(sim.app, name="sim")
app.add_typer(traffic.app, name="traffic")


def main() -> None:
    try:
        # standalone_mode=False: click hands exit codes back instead of exiting itself
        code = app(standalone_mode=False)
    except DenvError as exc:
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
