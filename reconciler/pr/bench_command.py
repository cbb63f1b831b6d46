"""Composition: `/denv bench` — bench the pull request's head beside the current release, with
parity, and comment both (pr/bench.py)."""

from __future__ import annotations

from reconciler.forge.models import CheckRun
from reconciler.pr.bench import bench_pull_request
from reconciler.pr.command import CommandContext, PrCommand


def _run(run: CommandContext) -> CheckRun:
    return bench_pull_request(
        run.forge,
        run.root,
        run.number,
        run.drivers,
        run.options,
        run.status,
        expect_head=run.head,
        cache=run.cache,
    ).check


BENCH = PrCommand(
    help="bench the head beside the current release on trial GPUs, with parity "
    "(the `denv bench` check)",
    run=_run,
)
