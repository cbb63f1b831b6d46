"""CLI: `denv optimize` — search for a faster recipe of a release on its own traffic, on trial
GPUs only; the candidates table; a verified winner as the bot's pull request; stop; status."""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from reconciler.cli.common import JsonOption, RepoOption, console, load, print_json, seconds
from reconciler.errors import DenvError, UsageError
from reconciler.optimize.candidates import Status, StudyState, headers, table
from reconciler.optimize.goal import GOAL_METRIC, GOALS, Goal
from reconciler.optimize.state import StateStore, split_target, state_home, study_status
from reconciler.spec.sources import find_root

if TYPE_CHECKING:
    from reconciler.optimize.start import StartOptions

# `status`, `candidates` and `stop` only read the study's state: this module imports nothing
# else at its top. What a run needs (optuna, SQLAlchemy, the fleet drivers, the load
# generator) is imported by `start` and `promote` (docs/performance.md, "Start-up").

app = typer.Typer(help="Search for a faster recipe on the release's own traffic.")


BudgetOption = Annotated[
    int, typer.Option("--budget-gpus", min=1, help="Most trial GPUs in use at once.")
]
GoalOption = Annotated[
    str,
    typer.Option(
        help="throughput (goodput/GPU at capacity), latency (TTFT p99) or cost ($/M output "
        "at capacity)."
    ),
]
AutoOption = Annotated[
    bool, typer.Option("--auto", help="Open the pull request for verified winners.")
]
TrafficOption = Annotated[
    Path | None,
    typer.Option(help="A Mooncake trace (default: the stage's recorded shape)."),
]
RequestsOption = Annotated[
    int, typer.Option(min=1, help="Requests of every run (at least 24), sent open loop.")
]
RunSecondsOption = Annotated[
    str, typer.Option(help="How long each run's arrivals last (at any rate).")
]
LeversOption = Annotated[
    str | None,
    typer.Option(help="Parts of the space to search, e.g. settings,kv (default: all)."),
]
MaxTrialsOption = Annotated[
    int | None, typer.Option(min=1, help="Trials (default: policies/optimizer.yaml).")
]
StorageOption = Annotated[
    str | None,
    typer.Option(help="optuna storage URL (default: SQLite beside the candidates file)."),
]
ReadyOption = Annotated[str, typer.Option(help="How long a trial may take to start.")]
SeedOption = Annotated[int | None, typer.Option(help="The sampler's seed (a repeatable study).")]
ParitySuiteOption = Annotated[
    str | None,
    typer.Option(
        help="Parity suite: a name under policies/parity/ or a file (default: the one "
        "policies/gates.yaml names)."
    ),
]
WatchOption = Annotated[
    str | None,
    typer.Option(help="Keep running: look this often for drift or catalog changes (1h)."),
]
VerifyOption = Annotated[
    str | None,
    typer.Option(
        help="Verify this inconclusive candidate again, without a trial (the command an "
        "inconclusive verification prints)."
    ),
]


@app.command("start")
def start(
    target: Annotated[str, typer.Argument(help="RELEASE/STAGE, e.g. chat-8b/prod.")],
    budget_gpus: BudgetOption,
    goal: GoalOption = "throughput",
    auto: AutoOption = False,
    traffic: TrafficOption = None,
    requests: RequestsOption = 64,
    run_seconds: RunSecondsOption = "10s",
    levers: LeversOption = None,
    max_trials: MaxTrialsOption = None,
    storage: StorageOption = None,
    ready_timeout: ReadyOption = "5m",
    seed: SeedOption = None,
    parity_suite: ParitySuiteOption = None,
    watch: WatchOption = None,
    verify: VerifyOption = None,
    repo: RepoOption = Path("."),
    as_json: JsonOption = False,
) -> None:
    """Search for a better recipe for RELEASE/STAGE on trial GPUs of its first fleet,
    verify winners (repeats and parity against the current release), and list them."""
    from reconciler.optimize.start import StartOptions

    if goal not in GOALS:
        raise UsageError(f"--goal {goal}: use throughput, latency or cost")
    if verify is not None and watch is not None:
        raise UsageError("--verify verifies one candidate once: give it without --watch")
    release, stage = split_target(target)
    root = find_root(repo)
    options = StartOptions(
        target=target,
        goal=goal_of(goal),
        budget_gpus=budget_gpus,
        auto=auto,
        traffic=traffic,
        requests=requests,
        run_s=seconds("--run-seconds", run_seconds),
        levers=[p.strip() for p in levers.split(",") if p.strip()] if levers else None,
        storage=storage,
        max_trials=max_trials,
        ready_timeout=seconds("--ready-timeout", ready_timeout),
        seed=seed,
        parity_suite=parity_suite,
        verify=verify,
    )
    every = seconds("--watch", watch) if watch else None
    final = _run_study(root, release, stage, options, every, not as_json)
    if as_json:
        print_json(final)
        return
    _print_table(final)


def _run_study(
    root: Path,
    release: str,
    stage: str,
    options: StartOptions,
    every: float | None,
    show_progress: bool,
) -> StudyState:
    """One run of the study, then (`--watch`) runs again as drift or the catalog asks; the
    state it leaves. SIGTERM (`denv optimize stop`) ends the run as Ctrl-C does: trials tear
    down."""
    from reconciler.cli.optimize_run import keep_running, run_once
    from reconciler.trials.deployment import sigterm_as_interrupt

    store = store_of(root)
    with store.running(release, stage), sigterm_as_interrupt():
        store.clear_stop(release, stage)
        final = run_once(root, options, store, show_progress=show_progress)
        if every is not None and final.state == "finished":
            with contextlib.suppress(KeyboardInterrupt):
                keep_running(root, options, store, every, final)
            final = store.require(release, stage)
        store.clear_stop(release, stage)
    return final


def store_of(root: Path) -> StateStore:
    return StateStore(state_home(root, os.environ))


def goal_of(text: str) -> Goal:
    for goal in GOALS:
        if goal == text:
            return goal
    raise UsageError(f"--goal {text}: use throughput, latency or cost")


def _print_table(state: StudyState) -> None:
    shown = Table(
        title=f"{state.key}: goal {state.goal}, study {state.study} ({state.state}, "
        f"{state.trials} trial{'' if state.trials == 1 else 's'})",
        title_justify="left",
    )
    for header in headers(state.goal):
        shown.add_column(header, overflow="fold")
    for row in table(state):
        shown.add_row(*row)
    console.print(shown)
    if state.target:
        console.print(f"latency target: {state.target}", markup=False, highlight=False)
    console.print(f"goal: {GOAL_METRIC[state.goal]}", markup=False, highlight=False)
    if state.note:
        console.print(f"{state.state}: {state.note}", markup=False, highlight=False)
    for each in state.candidates:
        if each.status is Status.INCONCLUSIVE and each.retry:
            console.print(f"verify {each.id} again: {each.retry}", markup=False, highlight=False)


@app.command("candidates")
def candidates(
    target: Annotated[str, typer.Argument(help="RELEASE/STAGE.")],
    repo: RepoOption = Path("."),
    as_json: JsonOption = False,
) -> None:
    """The study's candidates: change, figures against current, parity, status."""
    release, stage = split_target(target)
    state = store_of(find_root(repo)).require(release, stage)
    if as_json:
        print_json(state)
        return
    _print_table(state)


@app.command("promote")
def promote(
    candidate: Annotated[str, typer.Argument(help="A candidate id (or RELEASE/STAGE:ID).")],
    repo: RepoOption = Path("."),
    as_json: JsonOption = False,
) -> None:
    """Open (or update) the bot's pull request that makes a verified candidate the release's
    recipe; candidates that failed parity or are not verified are refused."""
    from reconciler.cli.optimize_run import promoter, say
    from reconciler.fleet.drivers.registry import Drivers

    root = find_root(repo)
    store = store_of(root)
    state = store.find_candidate(candidate)
    row = state.row(candidate.rpartition(":")[2])
    assert row is not None
    loaded = load(root)
    drivers = Drivers(warn=lambda m: say(f"warning: {m}"))
    try:
        number = promoter(root, loaded, drivers)(state, row)
    finally:
        drivers.close()
    store.save(state.with_row(row.model_copy(update={"pr": number})))
    if as_json:
        print_json({"candidate": row.id, "study": state.study, "pull_request": number})
        return
    console.print(
        f"Pull request #{number}: {state.release} for {state.stage}: {row.change} "
        f"(candidate {row.id}).",
        markup=False,
        soft_wrap=True,
    )


@app.command("stop")
def stop(
    target: Annotated[str, typer.Argument(help="RELEASE/STAGE.")],
    timeout: Annotated[str, typer.Option(help="How long to wait for it to end.")] = "2m",
    repo: RepoOption = Path("."),
    as_json: JsonOption = False,
) -> None:
    """Stop the study running for RELEASE/STAGE: its trial tears down, its state is kept."""
    release, stage = split_target(target)
    store = store_of(find_root(repo))
    pid = store.stop(release, stage)
    ended = pid is None
    deadline = time.monotonic() + seconds("--timeout", timeout)
    while pid is not None and time.monotonic() < deadline:
        if store.runner_pid(release, stage) is None:
            ended = True
            break
        time.sleep(0.2)
    if pid is None:
        store.clear_stop(release, stage)
    if as_json:
        print_json({"target": target, "pid": pid, "stopped": pid is not None and ended})
        return
    if pid is None:
        console.print(f"No study of {target} is running.", markup=False)
    elif ended:
        console.print(f"Stopped the study of {target} (process {pid}).", markup=False)
    else:
        raise DenvError(f"process {pid} did not end within {timeout}; it is tearing down")


@app.command("status")
def status(repo: RepoOption = Path("."), as_json: JsonOption = False) -> None:
    """Every study of this repository: its state, trials, verified candidates and PRs."""
    store = store_of(find_root(repo))
    rows = [study_status(store, state) for state in store.all()]
    if as_json:
        print_json([row.model_dump(mode="json") for row in rows])
        return
    if not rows:
        console.print(
            "No study yet: denv optimize start RELEASE/STAGE --budget-gpus N", markup=False
        )
        return
    shown = Table("TARGET", "GOAL", "STATE", "TRIALS", "VERIFIED", "PR", "STARTED")
    for row in rows:
        shown.add_row(
            row.target,
            row.goal,
            row.state,
            str(row.trials),
            (", ".join(row.verified) or "none")
            + "".join(f" ({c} inconclusive)" for c in row.inconclusive),
            ", ".join(f"#{n}" for n in row.pull_requests) or "none",
            f"{row.started:%Y-%m-%d %H:%M}",
        )
    console.print(shown)
