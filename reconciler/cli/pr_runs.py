"""CLI: `denv pr bench` and `denv pr commands` — what CI runs on a pull request's approval and
on a `/denv …` comment, against the local forge or GitHub (docs/github.md)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Literal, TypeVar

import typer

from reconciler.bench.run_info import sweep_levels
from reconciler.bench.traffic import read_trace
from reconciler.cli.common import JsonOption, RepoOption, console, print_json, seconds
from reconciler.cli.plan import cache_dir
from reconciler.cli.progress import ProgressSink
from reconciler.errors import UsageError
from reconciler.fleet.drivers.registry import Drivers
from reconciler.forge.commands import FULL_SHA
from reconciler.forge.config import open_forge
from reconciler.forge.protocol import Forge
from reconciler.pr.bench import BenchOptions, bench_pull_request
from reconciler.pr.commands import run_commands
from reconciler.pr.plan import approved_by as check_approval
from reconciler.pr.plan import open_head
from reconciler.spec.sources import find_root

DEFAULT_LEVELS = "1,8,32"
T = TypeVar("T")

PrOption = Annotated[int, typer.Option("--pr", help="Pull request number.", min=1)]
ForgeOption = Annotated[
    Literal["local", "github"] | None,
    typer.Option("--forge", help="Where the pull request is (default: DENV_FORGE, see docs)."),
]
TrafficOption = Annotated[
    Path | None, typer.Option("--traffic", help="A Mooncake JSONL trace to replay.")
]
WorkloadOption = Annotated[
    str | None, typer.Option("--workload", help="A standard workload (default: chat).")
]
ConcurrencyOption = Annotated[
    str | None, typer.Option(help=f"Client counts, e.g. 1,8,32 (default {DEFAULT_LEVELS}).")
]
RateOption = Annotated[str | None, typer.Option(help="Open-loop mean requests/s, e.g. 2,4,8.")]
RequestsOption = Annotated[
    int | None, typer.Option(min=1, help="Requests a level (default: a warm-up and ten a client).")
]
SuiteOption = Annotated[
    str | None,
    typer.Option(help="Parity suite: a name in policies/parity/ or a .jsonl path."),
]
TimeoutOption = Annotated[str, typer.Option(help="How long the engines may take to become ready.")]
HeadOption = Annotated[
    str | None,
    typer.Option(
        "--head",
        help="Only while the pull request's head is this commit (its 40 hex digits): what CI "
        "passes, so that a push after the approval is never run.",
    ),
]
OutOption = Annotated[
    Path | None,
    typer.Option(help="Also write each level's result file under DIR/results/, as bench run does."),
]


def _options(
    traffic: Path | None,
    workload: str | None,
    concurrency: str | None,
    rate: str | None,
    requests: int | None,
    suite: str | None,
    ready_timeout: str,
    out: Path | None = None,
) -> BenchOptions:
    mode, levels = sweep_levels(traffic, workload, concurrency, rate, DEFAULT_LEVELS)
    timeout = seconds("--ready-timeout", ready_timeout)
    return BenchOptions(
        mode=mode,
        levels=tuple(levels),
        requests=requests,
        trace=tuple(read_trace(traffic)) if traffic is not None else None,
        trace_name=traffic.name if traffic is not None else None,
        workload=workload or "chat",
        suite=suite,
        ready_timeout=timeout,
        out=out,
    )


def full_commit(option: str, value: str | None) -> str | None:
    """`value` when it names a commit in full; a prefix is refused, as in a comment command
    (forge/commands.py: a short one is forged by brute force)."""
    if value is not None and not FULL_SHA.match(value):
        raise UsageError(f"{option}: '{value}' is not a commit named in full (40 hex digits)")
    return value


def _open(repo: Path, kind: str | None) -> tuple[Path, Forge]:
    root = find_root(repo)
    env = {**os.environ, "DENV_FORGE": kind} if kind else dict(os.environ)
    return root, open_forge(root, env)


def _running(what: str, work: Callable[[Drivers, ProgressSink], T]) -> T:
    """`work` with the fleets' drivers and the progress sink (stderr: stdout stays clean)."""
    with ProgressSink(unit="requests") as shown:
        shown.phase(what)
        drivers = Drivers(warn=lambda m: shown.say(f"warning: {m}"))
        try:
            return work(drivers, shown)
        finally:
            drivers.close()


def bench(
    number: PrOption,
    traffic: TrafficOption = None,
    workload: WorkloadOption = None,
    concurrency: ConcurrencyOption = None,
    rate: RateOption = None,
    requests: RequestsOption = None,
    suite: SuiteOption = None,
    ready_timeout: TimeoutOption = "15m",
    out: OutOption = None,
    approved_by: Annotated[
        str | None,
        typer.Option(
            "--approved-by",
            help="Bench only if this user's approval of the head counts (what CI passes on "
            "a review: a review by someone without write permission starts nothing).",
        ),
    ] = None,
    head: HeadOption = None,
    forge_kind: ForgeOption = None,
    repo: RepoOption = Path("."),
    as_json: JsonOption = False,
) -> None:
    """Bench each release or recipe the pull request changes on its fleet's trial GPUs beside
    the current release, and run parity between them; comment the results with their changes
    and a Pareto chart, comment the parity verdict, and set the `denv bench` check (it fails
    when a run or parity fails)."""
    options = _options(traffic, workload, concurrency, rate, requests, suite, ready_timeout, out)
    expect = full_commit("--head", head)
    root, forge = _open(repo, forge_kind)
    if approved_by is not None:
        pr = open_head(forge, root, number, "benched", expect)
        check_approval(forge, root, pr, approved_by, cache_dir())
        expect = pr.head_sha  # the head whose approval counted, and no other
    result = _running(
        f"benching #{number}",
        lambda drivers, shown: bench_pull_request(
            forge,
            root,
            number,
            drivers,
            options,
            shown.phase,
            progress=shown.update,
            expect_head=expect,
            cache=cache_dir(),
        ),
    )
    if as_json:
        print_json(result.as_json())
        return
    for run in result.runs:
        console.print(run.line(), markup=False, highlight=False, soft_wrap=True)
    check = result.check
    console.print(
        f"#{number} at {result.pr.head_sha[:12]}: check '{check.name}' {check.conclusion}: "
        f"{check.title}",
        markup=False,
    )
    console.print(f"Bench commented on #{number}: {result.pr.url}", markup=False)
    if options.out is not None:
        console.print(
            f"result files written: {len(result.written)}, under {options.out / 'results'}",
            markup=False,
            highlight=False,
        )


def commands(
    number: PrOption,
    comment_id: Annotated[
        int | None, typer.Option("--comment-id", help="Only this comment's command.", min=1)
    ] = None,
    traffic: TrafficOption = None,
    workload: WorkloadOption = None,
    concurrency: ConcurrencyOption = None,
    rate: RateOption = None,
    requests: RequestsOption = None,
    suite: SuiteOption = None,
    ready_timeout: TimeoutOption = "15m",
    out: OutOption = None,
    forge_kind: ForgeOption = None,
    repo: RepoOption = Path("."),
    as_json: JsonOption = False,
) -> None:
    """Run the `/denv` commands (`/denv plan`, `/denv bench`) commented on the pull request
    that have not run yet, from users with write permission only; each runs once, an unknown
    one is refused, and the bot's commands comment lists them. The bench options apply to
    `/denv bench`."""
    options = _options(traffic, workload, concurrency, rate, requests, suite, ready_timeout, out)
    root, forge = _open(repo, forge_kind)
    result = _running(
        f"reading commands on #{number}",
        lambda drivers, shown: run_commands(
            forge, root, number, drivers, options, comment_id, shown.phase, cache=cache_dir()
        ),
    )
    if as_json:
        print_json(result.as_json())
        return
    if not result.ran:
        console.print(f"No new /denv commands on #{number}.", markup=False)
    for handled in result.ran:
        console.print(
            f"/denv {handled.command} (comment {handled.comment_id} by {handled.user}): "
            f"{handled.outcome}",
            markup=False,
            soft_wrap=True,
        )
