"""Composition: the bench of a pull request — each release or recipe it changes
(bench/pr_subjects.py), deployed on trial GPUs of its fleet beside the current release as the
base branch has it, both swept with the same traffic, and parity run between the two while
both are up; the results commented with their changes and a Pareto chart (edited in place),
the parity verdict commented, and the `denv bench` check set on the head commit: it fails
when a run fails or parity does. `denv pr bench` and `/denv bench` use it.

A simulated fleet's figures are labelled simulated in the comment and in the check.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from reconciler.bench.levels import Mode
from reconciler.bench.pr_subjects import BenchSubject, Side, bench_subjects
from reconciler.bench.pr_view import bench_rows, pareto_points
from reconciler.bench.results import write_result
from reconciler.bench.run_info import workload_requests
from reconciler.bench.sweep import Progress as SweepProgress
from reconciler.bench.traffic import TraceLine, generate
from reconciler.bench.trial_sweep import Load, sweep_trial
from reconciler.catalog.cost import fleet_price
from reconciler.errors import DenvError
from reconciler.fleet.drivers.registry import Drivers
from reconciler.forge.comments import render
from reconciler.forge.localgit import changed_paths
from reconciler.forge.models import CheckRun, Conclusion, PullRequest
from reconciler.forge.prdiff import fork_point
from reconciler.forge.protocol import Forge
from reconciler.forge.trusted import TrustedRef, trusted_ref
from reconciler.forge.views import BenchFailure, BenchView, Parities, ParityMismatch, ParityView
from reconciler.parity.runner import run_parity
from reconciler.parity.suite import Suite
from reconciler.parity.verdict import Verdict
from reconciler.pr.plan import (
    open_head,
    proposed,
    pull_request_source,
    trials_refused,
    trusted_note,
    trusted_policy,
)
from reconciler.pr.suites import CHANGED, ParitySuites, parity_suites
from reconciler.reconcile.source import GitSource, InvalidRevision
from reconciler.spec.repo import Repo
from reconciler.spec.result import Result
from reconciler.trials.deployment import TrialEndpoint, new_trial_id, trial_deployment
from reconciler.trials.plan import shares_the_agents_user

CHECK = "denv bench"
BY = "denv pr bench"  # what result files say ran them
MISMATCHES_SHOWN = 20
Say = Callable[[str], None]


@dataclass(frozen=True)
class BenchOptions:
    """What to send each side: a traffic file's lines, or a standard workload generated from
    the head's catalog; at which levels; and which parity suite to run."""

    mode: Mode = "concurrency"
    levels: tuple[float, ...] = (1.0, 8.0, 32.0)
    requests: int | None = None  # per level; None: a warm-up and ten a client
    trace: tuple[TraceLine, ...] | None = None
    trace_name: str | None = None
    workload: str = "chat"
    seed: int = 0
    suite: str | None = None  # in policies/parity/ at the head, or a .jsonl path; None: policy's
    ready_timeout: float = 900.0
    out: Path | None = None  # write results/ under it, as `denv bench run` does; None: not

    @property
    def traffic_name(self) -> str:
        return self.trace_name or self.workload

    def load(self, repo: Repo) -> Load:
        if self.trace is not None:
            lines, workload = list(self.trace), None
        else:
            count = workload_requests(self.mode, self.levels, self.requests)
            arrivals = self.levels[0] if self.mode == "rate" else None
            lines = generate(self.workload, count, self.seed, arrivals, profiles=repo.workloads)
            workload = self.workload
        return Load(
            traffic=lines,
            workload=workload,
            mode=self.mode,
            levels=list(self.levels),
            requests=self.requests,
        )


@dataclass(frozen=True)
class SubjectRun:
    subject: BenchSubject
    simulated: bool = False
    current: list[Result] = field(default_factory=list)
    candidate: list[Result] = field(default_factory=list)
    verdict: Verdict | None = None  # on the default branch's suite: the gate
    error: str | None = None
    proposed: Verdict | str | None = None  # on the pull request's changed suite: reported only

    @property
    def failed(self) -> bool:
        return self.error is not None or (self.verdict is not None and not self.verdict.ok)

    def line(self) -> str:
        kind = " (simulated)" if self.simulated else ""
        if self.error is not None:
            return f"{self.subject.key}{kind}: failed: {self.error}"
        parity = "nothing to compare with" if self.verdict is None else self.verdict.headline
        levels = len(self.candidate)
        line = f"{self.subject.key}{kind}: {levels} level{'s' * (levels != 1)}; parity {parity}"
        if self.proposed is not None:
            said = self.proposed if isinstance(self.proposed, str) else self.proposed.headline
            line += f"; on the pull request's suite (not gating): {said}"
        return line

    def as_json(self) -> dict[str, object]:
        return {
            "subject": self.subject.model_dump(mode="json", exclude={"candidate", "current"}),
            "simulated": self.simulated,
            "current": [r.model_dump(mode="json") for r in self.current],
            "candidate": [r.model_dump(mode="json") for r in self.candidate],
            "parity": None if self.verdict is None else self.verdict.model_dump(mode="json"),
            "proposed_parity": (
                self.proposed
                if self.proposed is None or isinstance(self.proposed, str)
                else self.proposed.model_dump(mode="json")
            ),
            "error": self.error,
        }


@dataclass(frozen=True)
class PrBench:
    pr: PullRequest
    base: str | None  # where the head left its base branch
    runs: list[SubjectRun]
    check: CheckRun
    comment_ids: list[int]
    written: list[str] = field(default_factory=list)  # result files, with --out

    def as_json(self) -> dict[str, object]:
        return {
            "pull_request": self.pr.model_dump(mode="json"),
            "base": self.base,
            "runs": [r.as_json() for r in self.runs],
            "check": self.check.model_dump(mode="json"),
            "comment_ids": self.comment_ids,
            "written": self.written,
        }


# -- running ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Runner:
    """One subject at a time on trial GPUs of its fleet, with what every run shares."""

    repo: Repo  # the head's files: fleets, hardware and models for both sides
    options: BenchOptions
    load: Load
    drivers: Drivers
    clock: Callable[[], dt.datetime]
    say: Say
    progress: SweepProgress = lambda *_: None
    starts: list[dt.datetime] = field(default_factory=list)  # of the sweeps so far
    written: list[str] = field(default_factory=list)  # result files, with options.out

    def start(self) -> dt.datetime:
        """Now to the second, later than every sweep's before: result ids hold it, and both
        sides of a release often share a recipe id, which must not make them share a file."""
        now = self.clock().replace(microsecond=0)
        if self.starts and now <= self.starts[-1]:
            now = self.starts[-1] + dt.timedelta(seconds=1)
        self.starts.append(now)
        return now

    def trial(self, side: Side, fleet: str) -> contextlib.AbstractContextManager[TrialEndpoint]:
        why = shares_the_agents_user(self.repo.fleets[fleet])
        if why is not None and fleet not in self.repo.policies.pr.agent_user_fleets:
            raise DenvError(
                f"{why}, and a pull request's code never runs as the agent's user: nothing "
                "started (policies/pr.yaml's agent_user_fleets accepts it for a fleet)"
            )
        return trial_deployment(
            self.repo,
            side.recipe,
            self.repo.fleets[fleet],
            drivers=self.drivers,
            trial=new_trial_id(self.clock()),
            weights=side.weights,
            secrets=self.repo.policies.pr.secrets,  # the trusted PR policy's: none by default
            ready_timeout=self.options.ready_timeout,
            say=self.say,
        )

    def sweep(self, side: Side, fleet: str, endpoint: TrialEndpoint) -> list[Result]:
        """One result a level; with `out`, each level's file written as soon as it ends."""
        self.say(f"bench {side.label} on {fleet}")
        spec = self.repo.fleets[fleet]
        price = fleet_price(self.repo, spec)
        sweep = sweep_trial(
            self.repo, side.recipe, spec, endpoint, self.load, price=price, at=self.start(), by=BY
        )
        results = []
        for swept in sweep.levels(self.drivers, self.progress):
            if self.options.out is not None:
                self.written.append(str(write_result(self.options.out, swept.result)))
            results.append(swept.result)
        return results

    def run(self, subject: BenchSubject, parity: ParitySuites) -> SubjectRun:
        """Both sides up at once (the current release first), swept one after the other, then
        parity between them (the gate, then the pull request's changed suite, when it has
        one); a failure of any step but the last is the run's error, after the teardown."""
        simulated = self.repo.fleets[subject.fleet].simulated
        current: list[Result] = []
        try:
            with contextlib.ExitStack() as trials:
                before = None
                if subject.current is not None:
                    before = trials.enter_context(self.trial(subject.current, subject.fleet))
                after = trials.enter_context(self.trial(subject.candidate, subject.fleet))
                if before is not None and subject.current is not None:
                    current = self.sweep(subject.current, subject.fleet, before)
                candidate = self.sweep(subject.candidate, subject.fleet, after)
                verdict, proposed = None, None
                if before is not None:
                    if isinstance(parity.gate, str):
                        raise DenvError(parity.gate)
                    self.say(f"parity {subject.key}")
                    verdict = run_parity(before.url, after.url, parity.gate, parity.policy)
                    proposed = _proposed(parity, before, after, self.say)
        except DenvError as exc:
            return SubjectRun(subject, simulated, current, error=str(exc) or type(exc).__name__)
        return SubjectRun(subject, simulated, current, candidate, verdict, proposed=proposed)


def _proposed(
    parity: ParitySuites, before: TrialEndpoint, after: TrialEndpoint, say: Say
) -> Verdict | str | None:
    """Parity on the pull request's version of the suite, when it changes it: reported beside
    the gate, so its failure to run is said, not the run's error."""
    if not isinstance(parity.proposed, Suite):
        return parity.proposed
    say("parity on the pull request's suite")
    try:
        return run_parity(before.url, after.url, parity.proposed, parity.policy)
    except DenvError as exc:
        return f"parity cannot run: {exc}"


# -- views -----------------------------------------------------------------------------------


def _side_name(side: Side, sha: str | None) -> str:
    return f"{side.label} @ {sha[:12]}" if sha else side.label


def _parity_view(
    run: SubjectRun, verdict: Verdict, suite: Suite, base: str | None, head: str
) -> ParityView:
    subject = run.subject
    assert subject.current is not None
    index = {prompt.id: number for number, prompt in enumerate(suite.prompts)}
    mismatches = []
    for outcome in verdict.failures[:MISMATCHES_SHOWN]:
        d = outcome.divergence
        if d is None:
            continue
        detail = f"{d.candidate!r} where the reference has {d.reference!r}"
        if d.in_top_k:
            detail += f", each in the other's top-{verdict.top_k}"
        mismatches.append(
            ParityMismatch(prompt=index.get(outcome.id, -1), position=d.position, detail=detail)
        )
    rule = (
        "greedy tokens identical"
        if verdict.mode == "strict"
        else f"a differing token must be in the other's top-{verdict.top_k}"
    )
    return ParityView(
        reference=_side_name(subject.current, base),
        candidate=f"{_side_name(subject.candidate, head)} on {subject.fleet}",
        mode=verdict.mode,
        rule=rule,
        passed=verdict.ok,
        prompts=verdict.total,
        mismatched=verdict.total - verdict.passed,
        mismatches=mismatches,
    )


def parity_views(
    run: SubjectRun, parity: ParitySuites, base: str | None, head: str
) -> list[ParityView]:
    """The gate's verdict, and beside it the verdict on the pull request's changed suite."""
    views = []
    if run.verdict is not None and isinstance(parity.gate, Suite):
        gate = _parity_view(run, run.verdict, parity.gate, base, head)
        views.append(gate.model_copy(update={"suite": parity.origin}))
    if isinstance(run.proposed, Verdict) and isinstance(parity.proposed, Suite):
        mine = _parity_view(run, run.proposed, parity.proposed, base, head)
        origin = f"`{parity.changed}` as this pull request changes it, at `{head[:12]}`"
        views.append(mine.model_copy(update={"suite": origin, "gating": False}))
    return views


def bench_view(
    pr: PullRequest,
    trusted: TrustedRef,
    base: str | None,
    runs: list[SubjectRun],
    traffic: str,
    head: Repo,
    files: list[str] | None = None,
    parity: ParitySuites | None = None,
) -> str:
    rows, points, notes, failures = [], [], [], []
    if (note := trusted_note(files or [], trusted)) is not None:
        notes.append(note)
    if parity is not None and (changed := parity.note(trusted)) is not None:
        notes.append(changed)
    for run in runs:
        if run.error is not None:
            failures.append(BenchFailure(subject=run.subject.key, error=run.error))
            continue
        rows += bench_rows(run.subject, run.current, run.candidate, run.simulated, head)
        points += pareto_points(run.subject, run.current, run.candidate, alone=len(runs) == 1)
        if run.subject.current is None:
            notes.append(f"{run.subject.key} is new: nothing to compare with, no parity run")
    if not runs:
        notes.append("This pull request changes no release or recipe: nothing to bench.")
    current = f"{pr.base_branch} @ {base[:12]}" if base else pr.base_branch
    return render(
        BenchView(
            head_sha=pr.head_sha,
            current=current,
            traffic=traffic,
            rows=rows,
            pareto=points,
            notes=notes,
            failures=failures,
        )
    )


def _check(runs: list[SubjectRun], suite_changed: bool = False) -> CheckRun:
    failed = [r for r in runs if r.failed]
    simulated = " (simulated)" if any(r.simulated for r in runs) else ""
    if not runs:
        title = "nothing to bench: no release or recipe changed"
    elif failed:
        errors = sum(r.error is not None for r in failed)
        parity = len(failed) - errors
        said = [f"{errors} run{'s' * (errors != 1)} failed"] * bool(errors)
        said += [f"parity failed for {parity}"] * bool(parity)
        title = f"{', '.join(said)} of {len(runs)}{simulated}"
    else:
        title = f"{len(runs)} benched, parity passed{simulated}"
    if suite_changed:
        title += f"; {CHANGED}"
    return CheckRun(
        name=CHECK,
        title=title,
        summary="\n".join(r.line() for r in runs) or title,
        conclusion=Conclusion.FAILURE if failed else Conclusion.SUCCESS,
    )


# -- the whole --------------------------------------------------------------------------------


def _base_repo(source: GitSource, fork: str | None) -> Repo | None:
    if fork is None:
        return None
    try:
        return source.repo_at(fork)
    except InvalidRevision:
        return None  # a base with invalid files: everything reads as new


def _invalid(forge: Forge, pr: PullRequest, exc: InvalidRevision, traffic: str) -> PrBench:
    """Files that do not validate, or that the PR policy refuses: no trial starts; the check
    fails and the bench comment lists every problem."""
    problems = [str(p) for p in exc.problems]
    check = CheckRun(
        name=CHECK,
        title=f"invalid or refused files: {len(problems)} problem{'s' * (len(problems) != 1)}",
        summary="\n".join(problems)[:60_000],
        conclusion=Conclusion.FAILURE,
    )
    view = BenchView(
        head_sha=pr.head_sha,
        current=pr.base_branch,
        traffic=traffic,
        rows=[],
        problems=problems,
    )
    ids = forge.upsert_comment(pr.number, "bench", render(view))
    forge.set_check(pr.head_sha, check)
    return PrBench(pr, None, [], check, ids)


def _refused(forge: Forge, pr: PullRequest, refusal: str, traffic: str) -> PrBench:
    """Nothing started, nothing connected to: said in the bench comment and a neutral check
    (nothing was measured, so nothing failed; a pull request into a feature branch may still
    merge there, and is benched once it heads for the default branch)."""
    view = BenchView(head_sha=pr.head_sha, current="…", traffic=traffic, rows=[], notes=[refusal])
    ids = forge.upsert_comment(pr.number, "bench", render(view))
    check = CheckRun(
        name=CHECK,
        title=f"not benched: its base, {pr.base_branch}, is not the default branch",
        summary=refusal,
        conclusion=Conclusion.NEUTRAL,
    )
    forge.set_check(pr.head_sha, check)
    return PrBench(pr, None, [], check, ids)


def bench_pull_request(
    forge: Forge,
    root: Path,
    number: int,
    drivers: Drivers,
    options: BenchOptions,
    status: Say = lambda message: None,
    clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
    progress: SweepProgress = lambda *_: None,
    expect_head: str | None = None,
    *,
    cache: Path,
) -> PrBench:
    """Bench and parity for every release or recipe the head of pull request `number`
    changes (only while the head is `expect_head`, when given); comment the results and the
    verdicts, set the `denv bench` check. A pull request whose base is not the default
    branch starts nothing on any host."""
    pr = open_head(forge, root, number, "benched", expect_head)
    trusted = trusted_ref(forge, root)
    source = pull_request_source(root, trusted, cache)
    if (refusal := trials_refused(pr, trusted, trusted_policy(source, trusted))) is not None:
        return _refused(forge, pr, refusal, options.traffic_name)
    try:
        head = proposed(source, pr.head_sha)  # fleets and policies: the default branch's
    except InvalidRevision as exc:
        return _invalid(forge, pr, exc, options.traffic_name)
    base = fork_point(root, pr.base_branch, pr.head_sha)
    subjects = bench_subjects(_base_repo(source, base), head)
    parity = parity_suites(
        source, root, trusted, pr.head_sha, head.policies.gates.parity, options.suite
    )
    runner = _Runner(head, options, options.load(head), drivers, clock, status, progress)
    runs = []
    for subject in subjects:
        status(f"{subject.key}: deploying on trial GPUs")
        runs.append(runner.run(subject, parity))
    status(f"commenting on #{number}")
    files = changed_paths(root, pr.base_branch, pr.head_sha)
    view = bench_view(pr, trusted, base, runs, options.traffic_name, head, files, parity)
    ids = forge.upsert_comment(number, "bench", view)
    views = [v for r in runs for v in parity_views(r, parity, base, pr.head_sha)]
    if views:
        ids += forge.upsert_comment(number, "parity", render(Parities(verdicts=views)))
    check = _check(runs, parity.changed is not None)
    forge.set_check(pr.head_sha, check)
    return PrBench(pr, base, runs, check, ids, runner.written)
