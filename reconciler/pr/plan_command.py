"""Composition: `/denv plan` — plan the pull request's head and comment the plan (pr/plan.py)."""

from __future__ import annotations

from reconciler.forge.models import CheckRun
from reconciler.pr.command import CommandContext, PrCommand
from reconciler.pr.plan import plan_pull_request


def _run(run: CommandContext) -> CheckRun:
    return plan_pull_request(
        run.forge, run.root, run.number, run.drivers, run.status, run.head, cache=run.cache
    ).check


PLAN = PrCommand(help="plan the head and comment the plan (the `denv plan` check)", run=_run)
