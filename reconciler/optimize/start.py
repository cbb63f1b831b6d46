"""Adapter: what `denv optimize start RELEASE/STAGE` resolves before its loop runs — the
stage and its first fleet (whose trial GPUs the trials use), the latency target from the
stage's alarms, the traffic, the parity suite, the search space and the optuna study; then
the study's state, continued when the study is the same (optimize/continuing.py).
"""

from __future__ import annotations

import datetime as dt
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from reconciler.bench.traffic import TraceLine, read_trace, trace_digest
from reconciler.bench.traffic_stats import trace_stats
from reconciler.errors import DenvError, NotFound, UsageError
from reconciler.optimize.candidates import Row, Status, StudyState
from reconciler.optimize.continuing import MEASURE, check_retry, finished_study_note, study_name
from reconciler.optimize.goal import Goal
from reconciler.optimize.measuring import Setup
from reconciler.optimize.prescreen import prescreen
from reconciler.optimize.space import Candidate, SearchSpace
from reconciler.optimize.state import StateStore, default_storage, shown_storage, split_target
from reconciler.optimize.study import Study
from reconciler.optimize.watch import catalog_marks
from reconciler.optimize.workload import Workload, recorded_shape_path, run_lines, stage_target
from reconciler.parity.suite_files import load_suite
from reconciler.spec.fleet import Fleet
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
    fleet = trial_fleet(repo, stage, options)
    target = stage_target(stage, repo.policies.alarms)
    lines, source = traffic_lines(root, release, stage_name, options.traffic)
    space = candidate_space(repo, release, stage_name, fleet.name, options)
    inputs = _study_inputs(repo, release, stage_name, space, lines, source, options)
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
    max_trials = options.max_trials or repo.policies.optimizer.max_trials
    study = Study(
        storage,
        inputs.name,
        space,
        options.goal,
        target,
        screened=screened,
        max_trials=max_trials,
        seed=options.seed,
    )
    setup = _setup(root, repo, release, fleet, study, work, max_trials, options)
    previous = store.load(release, stage_name)
    same = previous if previous is not None and previous.study == inputs.name else None
    _check_previous(previous, same, inputs.name, setup, options, say)
    if same is not None:
        return setup, _continued(same, study, say)
    state = _new_state(setup, options, release, stage_name, inputs, shown_storage(storage), now)
    return setup, state


def trial_fleet(repo: Repo, stage: Stage, options: StartOptions) -> Fleet:
    """The stage's first fleet, whose trial GPUs hold the budget (UsageError when not)."""
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
    return fleet


def candidate_space(
    repo: Repo, release: str, stage: str, fleet: str, options: StartOptions
) -> SearchSpace:
    """The candidates' space. The current release stays deployed beside each candidate (the
    reference for verification and parity): candidates get what of the budget it leaves."""
    rules = repo.policies.optimizer
    space = SearchSpace.for_release(repo, release, fleet, options.budget_gpus, rules, stage=stage)
    left = options.budget_gpus - space.current().gpus
    if left < 1:
        raise UsageError(
            f"--budget-gpus {options.budget_gpus}: the current release takes "
            f"{space.current().gpus} trial GPUs beside every candidate; give at least "
            f"{space.current().gpus + 1}"
        )
    return SearchSpace.for_release(
        repo, release, fleet, left, rules, stage=stage, levers=options.levers
    )


@dataclass(frozen=True)
class StudyInputs:
    """What names a study (study_name), as its state records them."""

    name: str
    traffic: str  # where the traffic came from
    digest: str  # the traffic's
    marks: list[str]  # the catalog's, for the current recipe's model


def _study_inputs(
    repo: Repo,
    release: str,
    stage: str,
    space: SearchSpace,
    lines: list[TraceLine],
    source: str,
    options: StartOptions,
) -> StudyInputs:
    current_recipe = space.recipe_of(space.current())
    digest = trace_digest(lines)
    marks = catalog_marks(repo, current_recipe.model)
    runs = f"{MEASURE}, {options.requests} requests or {options.run_s:g} s a run"
    name = study_name(
        release,
        stage,
        options.goal,
        recipe_digest(current_recipe),
        digest,
        "\n".join(marks),
        runs,
        options.levers,
    )
    return StudyInputs(name=name, traffic=source, digest=digest, marks=marks)


def _setup(
    root: Path,
    repo: Repo,
    release: str,
    fleet: Fleet,
    study: Study,
    work: Workload,
    max_trials: int,
    options: StartOptions,
) -> Setup:
    """The loop's setup, with the parity suite the optimizer's rules and the gates name."""
    rules = repo.policies.optimizer
    gates = repo.policies.gates.parity
    policy = ParityPolicy(mode=rules.parity, top_k=rules.parity_top_k, suite=gates.suite)
    suite = load_suite(root, options.parity_suite or policy.suite)
    return Setup(
        repo=repo,
        space=study.space,
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


def _check_previous(
    previous: StudyState | None,
    same: StudyState | None,
    name: str,
    setup: Setup,
    options: StartOptions,
    say: Callable[[str], None],
) -> None:
    """Refuse a --verify the study `name` cannot take, and say what becomes of the last
    study: a new one replaces it, or it is finished (UsageError when --max-trials allows
    nothing)."""
    if options.verify is not None:
        check_retry(same, options.verify, name)
    if previous is not None and same is None:
        say(f"a new study {name} (the last one, {previous.study}, measured other inputs)")
    if same is not None and same.state == "finished" and options.verify is None:
        used = setup.study.trials_used()
        max_trials, explicit = setup.max_trials, options.max_trials
        note = finished_study_note(same, used, max_trials, explicit, options.auto)
        if note is not None:
            say(note)


def _continued(previous: StudyState, study: Study, say: Callable[[str], None]) -> StudyState:
    """The same study's state, running again."""
    # This process holds the study's lock: a row still trialing belongs to a run that died.
    held = [r.trial for r in previous.candidates if r.status is Status.TRIALING]
    failed = study.abandon(t for t in held if t is not None)
    if held:
        say(f"{len(held)} trial(s) of a run that died marked failed (optuna trials {failed})")
    state = previous.unfinished("interrupted before its trial ended (its run died)")
    return state.model_copy(update={"state": "running", "finished": None, "note": None})


def _new_state(
    setup: Setup,
    options: StartOptions,
    release: str,
    stage: str,
    inputs: StudyInputs,
    storage: str,
    now: dt.datetime,
) -> StudyState:
    """A new study's state, with the current release as its first row."""
    current, target = setup.space.current(), setup.work.target
    return StudyState(
        release=release,
        stage=stage,
        fleet=setup.fleet.name,
        goal=options.goal,
        target=str(target) if target else None,
        budget_gpus=options.budget_gpus,
        study=inputs.name,
        storage=storage,
        traffic=inputs.traffic,
        traffic_digest=inputs.digest,
        levers=sorted(set(options.levers)) if options.levers else None,
        shape=trace_stats(setup.work.lines),
        catalog=inputs.marks,
        started=now,
        current=Row(
            id=current.id,
            change="current",
            recipe=setup.space.recipe_of(current).id,
            gpus=current.gpus,
            at=now,
        ),
    )
