"""Adapter: what `denv optimize start RELEASE/STAGE` resolves before its loop runs — the
stage and its first fleet (whose trial GPUs the trials use), the latency target from the
stage's alarms, the traffic, the parity suite, the search space and the optuna study.

The study's name carries digests of the current recipe, of the traffic and of how a run is
measured, and the levers searched when they are not all of them: starting again on the same
release, traffic and levers continues the study (optuna keeps its trials, the candidates file
its rows); a changed release, traffic or run length starts a new one, and other `--levers` a
new one whose name says so (`….levers-kv_dtype+max_batch`).

Starting a finished study again: a `--max-trials` above the trials it used continues it;
`--auto` promotes its verified winner (loop.run, before any trial); one whose trials are
spent runs none and says so — and an explicit `--max-trials` that allows none is refused.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from reconciler.bench.traffic import TraceLine, read_trace, trace_digest
from reconciler.bench.traffic_stats import trace_stats
from reconciler.errors import DenvError, NotFound, UsageError
from reconciler.optimize.candidates import Row, Status, StudyState, retriable
from reconciler.optimize.goal import Goal
from reconciler.optimize.measuring import Setup
from reconciler.optimize.prescreen import prescreen
from reconciler.optimize.space import Candidate, SearchSpace
from reconciler.optimize.state import StateStore, default_storage, shown_storage, split_target
from reconciler.optimize.study import Study
from reconciler.optimize.watch import catalog_marks
from reconciler.optimize.workload import Workload, recorded_shape_path, run_lines, stage_target
from reconciler.parity.suite_files import load_suite
from reconciler.spec.policy import ParityPolicy
from reconciler.spec.release import Stage
from reconciler.spec.repo import Repo
from reconciler.trials.plan import recipe_digest

# The pre-screen predicts every candidate of a space this small, else a random sample.
# (each candidate's prediction is a capacity search: several predicted runs)
GRID_LIMIT = 300
SAMPLE_SIZE = 120


@dataclass(frozen=True)
class StartOptions:
    target: str  # RELEASE/STAGE
    goal: Goal
    budget_gpus: int
    auto: bool = False
    traffic: Path | None = None
    requests: int = 64  # a run's least, sent open loop at the traffic's pace (time-scaled)
    run_s: float = 10.0  # seconds of arrivals a run lasts
    levers: Sequence[str] | None = None  # parts of the space to search; None: all
    storage: str | None = None  # optuna's; default: SQLite in the state folder
    max_trials: int | None = None  # default: rules.max_trials
    ready_timeout: float = 300.0
    seed: int | None = None  # the sampler's, for a study that repeats exactly
    parity_suite: str | None = None  # a suite name or file; default: the gates' suite
    verify: str | None = None  # verify this inconclusive candidate again (no trial)


def retry_command(options: StartOptions, candidate: str) -> str:
    """The `denv optimize start` that continues the same study (the same target, goal, levers,
    traffic, run length and storage) and verifies `candidate` again."""
    words = ["denv", "optimize", "start", options.target, "--budget-gpus", str(options.budget_gpus)]
    if options.goal != "throughput":
        words += ["--goal", options.goal]
    if options.traffic is not None:
        words += ["--traffic", str(options.traffic)]
    if options.requests != StartOptions.requests:
        words += ["--requests", str(options.requests)]
    if options.run_s != StartOptions.run_s:
        words += ["--run-seconds", f"{options.run_s:g}s"]
    if options.levers:
        words += ["--levers", ",".join(options.levers)]
    if options.storage is not None:
        words += ["--storage", shown_storage(options.storage)]
    if options.seed is not None:
        words += ["--seed", str(options.seed)]
    if options.parity_suite is not None:
        words += ["--parity-suite", options.parity_suite]
    if options.auto:
        words.append("--auto")
    return shlex.join([*words, "--verify", candidate])


def find_stage(repo: Repo, release: str, stage: str) -> Stage:
    found = repo.releases.get(release)
    if found is None:
        known = ", ".join(sorted(repo.releases)) or "none"
        raise NotFound(f"no release '{release}' (releases: {known})")
    for each in found.stages:
        if each.name == stage:
            return each
    names = ", ".join(s.name for s in found.stages)
    raise NotFound(f"release {release} has no stage '{stage}' (stages: {names})")


def traffic_lines(
    root: Path, release: str, stage: str, given: Path | None
) -> tuple[list[TraceLine], str]:
    """The traffic and where it came from: the given file, else the stage's recorded shape."""
    if given is not None:
        return read_trace(given), str(given)
    recorded = root / recorded_shape_path(release, stage)
    if not recorded.is_file():
        raise DenvError(
            f"no traffic for {release}/{stage}: record the stage's shape with `denv traffic "
            f"record --upstream <its endpoint> --out {recorded_shape_path(release, stage)}`, "
            "or give --traffic FILE"
        )
    return read_trace(recorded), recorded_shape_path(release, stage)


# What a run measures: goodput per GPU at the capacity the search finds (capacity.py). A
# study of another definition (tok/s/GPU at a fixed concurrency) is never continued.
MEASURE = "open-loop capacity search, goodput/GPU"


def study_name(
    release: str,
    stage: str,
    goal: Goal,
    recipe: str,
    traffic: str,
    marks: str,
    runs: str = MEASURE,
    levers: Sequence[str] | None = None,
) -> str:
    """`<release>.<stage>.<goal>.<digest>`, the digest over the current recipe, the traffic,
    the catalog marks and how runs measure (`runs`); `.levers-a+b` when only some levers are
    searched."""
    digest = hashlib.sha256(f"{recipe}\n{traffic}\n{marks}\n{runs}".encode()).hexdigest()[:8]
    searched = f".levers-{'+'.join(sorted(set(levers)))}" if levers else ""
    return f"{release}.{stage}.{goal}.{digest}{searched}"


def finished_study_note(
    previous: StudyState, used: int, max_trials: int, explicit: int | None, auto: bool
) -> str | None:
    """What starting the finished study `previous` again does when its trials are spent: None
    when it has trials left; UsageError when an `explicit` --max-trials allows none and there
    is no --auto to act on (the command would do nothing it was asked to)."""
    if used < max_trials:
        return None
    retries = "".join(
        f"; {r.id} is inconclusive: `{r.retry}` verifies it again"
        for r in previous.candidates
        if r.status is Status.INCONCLUSIVE and r.retry
    )
    if explicit is not None and not auto:
        raise UsageError(
            f"{previous.key}: study {previous.study} has used {used} trials already; "
            f"--max-trials {explicit} allows no more: give more than {used} to continue it"
            + retries
        )
    return (
        f"study {previous.study} is finished ({used} of {max_trials} trials): nothing to trial; "
        f"--max-trials above {used} continues it, other --levers start a new study{retries}"
    )


def check_retry(previous: StudyState | None, candidate: str, name: str) -> None:
    """UsageError unless the study `name` has `candidate` inconclusive, or verified already
    (`--verify`: a retry run twice, or after another verified it, is no error)."""
    if previous is None:
        raise UsageError(
            f"--verify {candidate}: no study {name} to continue: give the options of the "
            "`denv optimize start` that trialed it (the retry command it printed has them)"
        )
    row = previous.row(candidate)
    if row is not None and row.status is Status.VERIFIED:
        return  # verified already: the retry does nothing (Loop.reverify says so)
    if row is None or not retriable(row):
        shown = ", ".join(r.id for r in previous.candidates if retriable(r)) or "none"
        state = f"it is {row.status.value}" if row is not None else "no such candidate"
        raise UsageError(
            f"--verify {candidate}: only an inconclusive candidate is verified again "
            f"({state}; inconclusive in study {name}: {shown})"
        )


def screen_candidates(space: SearchSpace) -> list[Candidate]:
    """What the pre-screen predicts: the whole grid when it is small, else a sample of it."""
    if space.size() <= GRID_LIMIT:
        return list(space.grid())
    return [space.current(), *space.sample(SAMPLE_SIZE)]


def resolve(
    root: Path,
    repo: Repo,
    options: StartOptions,
    store: StateStore,
    now: dt.datetime,
    say: Callable[[str], None] = lambda _message: None,
) -> tuple[Setup, StudyState]:
    """The loop's setup and its state (continued when the study is the same)."""
    release, stage_name = split_target(options.target)
    stage = find_stage(repo, release, stage_name)
    fleet = repo.fleets.get(stage.fleets[0])
    if fleet is None:
        raise NotFound(f"{options.target}: no fleet '{stage.fleets[0]}'")
    if options.budget_gpus < 1:
        raise UsageError("--budget-gpus must be at least 1")
    if options.budget_gpus > fleet.trial_gpus:
        raise UsageError(
            f"--budget-gpus {options.budget_gpus}: fleet {fleet.name} keeps "
            f"{fleet.trial_gpus} trial GPUs (trial_gpus in fleets/{fleet.name}.yaml); "
            "the optimizer never uses GPUs that serve a release"
        )
    rules = repo.policies.optimizer
    target = stage_target(stage, repo.policies.alarms)
    lines, source = traffic_lines(root, release, stage_name, options.traffic)
    space = SearchSpace.for_release(
        repo, release, fleet.name, options.budget_gpus, rules, stage=stage_name
    )
    # The current release stays deployed beside each candidate (the reference for
    # verification and parity): candidates get what of the budget it leaves.
    left = options.budget_gpus - space.current().gpus
    if left < 1:
        raise UsageError(
            f"--budget-gpus {options.budget_gpus}: the current release takes "
            f"{space.current().gpus} trial GPUs beside every candidate; give at least "
            f"{space.current().gpus + 1}"
        )
    space = SearchSpace.for_release(
        repo, release, fleet.name, left, rules, stage=stage_name, levers=options.levers
    )
    current = space.current()
    current_recipe = space.recipe_of(current)
    digest = trace_digest(lines)
    marks = catalog_marks(repo, current_recipe.model)
    runs = f"{MEASURE}, {options.requests} requests or {options.run_s:g} s a run"
    name = study_name(
        release,
        stage_name,
        options.goal,
        recipe_digest(current_recipe),
        digest,
        "\n".join(marks),
        runs,
        options.levers,
    )
    if options.storage is None:
        store.home.mkdir(parents=True, exist_ok=True)  # SQLite makes the file, not its folder
    storage = options.storage or default_storage(store.home)
    run_lines(lines, options.requests)  # refuses a traffic without arrival times, up front
    work = Workload(
        lines=lines,
        requests=options.requests,
        run_s=options.run_s,
        goal=options.goal,
        target=target,
        gpu_hour=space.gpu_hour,
    )
    say(f"pre-screening {options.target} with the simulator's model")
    screened = prescreen(space, screen_candidates(space), work)
    max_trials = options.max_trials or rules.max_trials
    study = Study(
        storage,
        name,
        space,
        options.goal,
        target,
        screened=screened,
        max_trials=max_trials,
        seed=options.seed,
    )
    gates = repo.policies.gates.parity
    policy = ParityPolicy(mode=rules.parity, top_k=rules.parity_top_k, suite=gates.suite)
    suite = load_suite(root, options.parity_suite or policy.suite)
    setup = Setup(
        repo=repo,
        space=space,
        study=study,
        fleet=fleet,
        weights=repo.releases[release].release.weights,
        work=work,
        rules=rules,
        suite=suite,
        parity=policy,
        max_trials=max_trials,
        auto=options.auto,
        ready_timeout=options.ready_timeout,
        verify=options.verify,
        retry=lambda candidate: retry_command(options, candidate),
    )
    previous = store.load(release, stage_name)
    if options.verify is not None:
        check_retry(previous if previous is not None and previous.study == name else None,
                    options.verify, name)  # fmt: skip
    if previous is not None and previous.study != name:
        say(f"a new study {name} (the last one, {previous.study}, measured other inputs)")
    if (
        previous is not None
        and previous.study == name
        and previous.state == "finished"
        and options.verify is None
    ):
        used = study.trials_used()
        note = finished_study_note(previous, used, max_trials, options.max_trials, options.auto)
        if note is not None:
            say(note)
    if previous is not None and previous.study == name:
        # This process holds the study's lock: a row still trialing belongs to a run that died.
        held = [r.trial for r in previous.candidates if r.status is Status.TRIALING]
        failed = study.abandon(t for t in held if t is not None)
        if held:
            say(f"{len(held)} trial(s) of a run that died marked failed (optuna trials {failed})")
        state = previous.unfinished("interrupted before its trial ended (its run died)")
        state = state.model_copy(update={"state": "running", "finished": None, "note": None})
    else:
        state = StudyState(
            release=release,
            stage=stage_name,
            fleet=fleet.name,
            goal=options.goal,
            target=str(target) if target else None,
            budget_gpus=options.budget_gpus,
            study=name,
            storage=shown_storage(storage),
            traffic=source,
            traffic_digest=digest,
            levers=sorted(set(options.levers)) if options.levers else None,
            shape=trace_stats(lines),
            catalog=marks,
            started=now,
            current=Row(
                id=current.id,
                change="current",
                recipe=current_recipe.id,
                gpus=current.gpus,
                at=now,
            ),
        )
    return setup, state
