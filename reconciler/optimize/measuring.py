"""Adapter: what the optimizer's loop measures with, and how it verifies — deploying a recipe on
trial GPUs, a capacity run (trials.py) with its progress, a run that is evidence (one in which
the load generator fell behind its schedule is measured again, never averaged in:
candidates.evidence), and verification: repeats of both sides, interleaved, until the gain's
interval decides (verdict.py), then the parity suite against the current release. The search
around it (the study, the screen, promotion) is runner.py's `Loop`.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from reconciler.errors import DenvError, ParityError
from reconciler.fleet.drivers.registry import Drivers
from reconciler.optimize.candidates import Row, Run, Status, StudyState, evidence
from reconciler.optimize.capacity import AT_RECORDED_RATE, Ladder, rounded
from reconciler.optimize.goal import higher_is_better, searches_capacity
from reconciler.optimize.outcome import Outcome
from reconciler.optimize.space import SearchSpace
from reconciler.optimize.state import StateStore
from reconciler.optimize.study import Study
from reconciler.optimize.trials import capacity, deployed
from reconciler.optimize.verdict import judge
from reconciler.optimize.verify import most_runs
from reconciler.optimize.workload import Workload
from reconciler.parity.runner import run_parity
from reconciler.parity.suite import Suite
from reconciler.spec.fleet import Fleet
from reconciler.spec.policy import OptimizerRules, ParityPolicy
from reconciler.spec.recipe import Recipe
from reconciler.spec.repo import Repo
from reconciler.trials.deployment import TrialEndpoint, check_running

Say = Callable[[str], None]
Progress = Callable[[str, int, int], None]  # (what, done, total): trials, a run's requests
Ended = Callable[[str, str], None]  # (what, how): a run that ended before its total, at once
Promote = Callable[[StudyState, Row], int]  # opens or updates the PR; its number

# A run in which the load generator fell behind is measured again this many times at most.
CLIENT_RETRIES = 2


class StudyStopped(DenvError):
    """`denv optimize stop` asked the running study to end."""


@dataclass
class Setup:
    """Everything one run of the loop needs, resolved by the caller."""

    repo: Repo
    space: SearchSpace
    study: Study
    fleet: Fleet
    weights: str
    work: Workload
    rules: OptimizerRules
    suite: Suite
    parity: ParityPolicy
    max_trials: int
    auto: bool = False
    ready_timeout: float = 300.0
    verify: str | None = None  # `--verify CANDIDATE`: verify that one again, no trial
    retry: Callable[[str], str] = lambda candidate: f"--verify {candidate}"  # its command


@dataclass
class Effects:
    store: StateStore
    drivers: Drivers
    promote: Promote | None = None
    say: Say = lambda _message: None
    progress: Progress = lambda *_: None
    ended: Ended = lambda *_: None
    clock: Callable[[], dt.datetime] = field(default=lambda: dt.datetime.now(dt.UTC))


class Measuring:
    def __init__(self, setup: Setup, effects: Effects, state: StudyState) -> None:
        self.setup, self.fx, self.state = setup, effects, state
        self.up = higher_is_better(setup.work.goal)
        self.current = setup.space.current()
        self.current_recipe = setup.space.recipe_of(self.current)

    # -- state ------------------------------------------------------------------------------
    def save(self, row: Row | None = None, **changes: Any) -> None:
        if row is not None:
            self.state = self.state.with_row(row)
        if changes:
            self.state = self.state.model_copy(update=changes)
        self.fx.store.save(self.state)

    def check_stop(self) -> None:
        if self.fx.store.stop_requested(self.state.release, self.state.stage):
            raise StudyStopped(f"{self.state.key}: stopped by `denv optimize stop`")

    # -- measuring --------------------------------------------------------------------------
    @contextlib.contextmanager
    def deploy(self, recipe: Recipe) -> Iterator[TrialEndpoint]:
        """`recipe` on trial GPUs for the `with` block."""
        with deployed(
            self.setup.repo,
            recipe,
            self.setup.fleet,
            drivers=self.fx.drivers,
            weights=self.setup.weights,
            ready_timeout=self.setup.ready_timeout,
            say=self.fx.say,
        ) as endpoint:
            # ready by its probe; but an address another process held answers probes too
            check_running(endpoint, self.setup.fleet, self.fx.drivers)
            yield endpoint

    def ladder(self, start: float | None = None, near: bool = False) -> Ladder:
        """The capacity search's ladder: from `start` (a speed found already), else from the
        traffic's own rate; `near`: a verification repeat's."""
        if not searches_capacity(self.setup.work.goal):
            return AT_RECORDED_RATE
        first = Ladder() if start is None else Ladder(start=start)
        return first.near(first.start) if near else first

    def measure(self, endpoint: TrialEndpoint, label: str, ladder: Ladder) -> Run:
        def named(speed: float) -> str:
            return f"{label} at {rounded(speed)}x"

        def progress(speed: float) -> Callable[[int, int], None]:
            return lambda done, total: self.fx.progress(named(speed), done, total)

        def ended(speed: float, run: Run | None) -> None:
            # a run that answered every request has had its line already
            how = "failed at " if run is None else "ended at "
            if run is not None and run.stopped_early:
                how = "stopped early: it clearly misses the target, at "
            self.fx.ended(named(speed), how)

        return capacity(
            endpoint,
            self.setup.work,
            ladder,
            fleet=self.setup.fleet,
            drivers=self.fx.drivers,
            progress=progress,
            ended=ended,
        )

    def evidence_run(self, endpoint: TrialEndpoint, label: str, ladder: Ladder) -> Run:
        """A run that is evidence: one in which the load generator fell behind is said and
        measured again, CLIENT_RETRIES times at most (the last one is returned either way)."""
        run = self.measure(endpoint, label, ladder)
        for _ in range(CLIENT_RETRIES):
            if not run.client_behind:
                break
            self.fx.say(f"  {label}: {describe(run)}; measuring again")
            run = self.measure(endpoint, label, ladder)
        return run

    def outcome(self, run: Run, gpus: int) -> Outcome:
        return Outcome(
            metrics=run.metrics,
            gpus=gpus,
            gpu_hour=self.setup.work.gpu_hour,
            behind=run.miss is not None and run.miss.startswith("answers"),
            rate=run.rate,
            served=run.served,
        )

    def verify(
        self,
        row: Row,
        endpoint: TrialEndpoint,
        reference: TrialEndpoint,
        start: float | None = None,
    ) -> Row:
        """Repeats of both, interleaved, until each side has `repeats` runs that are evidence;
        one more of each while the gain is within noise (up to `most_runs`); then parity
        against the current release. `start`: where the candidate's repeats search (default:
        its first run's capacity)."""
        repeats, most = self.setup.rules.repeats, most_runs(self.setup.rules.repeats)
        self.fx.say(f"  {row.id} looks better: verifying ({repeats} runs each, then parity)")
        sides: dict[str, list[Run]] = {"current": [], row.id: list(row.runs)}
        ends = {"current": reference, row.id: endpoint}
        ladders = {
            "current": self.ladder(self.state.current.runs[0].speed, near=True),
            row.id: self.ladder(start or (row.runs[0].speed if row.runs else None), near=True),
        }
        wanted = repeats
        while True:
            self.fill(sides, ends, ladders, wanted, most + CLIENT_RETRIES)
            row = row.model_copy(update={"runs": sides[row.id]})
            decision, why, gain = judge(
                row.runs,
                sides["current"],
                self.setup.rules,
                higher_is_better=self.up,
                searches=searches_capacity(self.setup.work.goal),
            )
            if decision != "inconclusive" or wanted >= most:
                break
            wanted += 1
            self.fx.say(f"  {row.id}: {why}: one more run each ({wanted} of at most {most})")
        self.save(
            current=self.state.current.model_copy(
                update={"runs": [*self.state.current.runs, *sides["current"]]}
            )
        )
        row = row.model_copy(update={"gain": gain})
        if decision == "inconclusive":
            return self._inconclusive(row, f"{why}, after {wanted} runs each")
        if decision == "rejected":
            return self._rejected(row, why or "rejected")
        return self.parity(row, reference, endpoint)

    def fill(
        self,
        sides: dict[str, list[Run]],
        ends: dict[str, TrialEndpoint],
        ladders: dict[str, Ladder],
        wanted: int,
        most: int,
    ) -> None:
        """Measure each side, interleaved, until it has `wanted` runs that are evidence (or
        `most` runs in all): a run in which the load generator fell behind is said, kept and
        measured again."""
        while True:
            short = [k for k, runs in sides.items() if len(evidence(runs)) < wanted
                     and len(runs) < most]  # fmt: skip
            if not short:
                return
            for side in short:
                self.check_stop()
                label = f"{side} run {len(sides[side]) + 1}"
                run = self.measure(ends[side], label, ladders[side])
                self.fx.say(f"  {label}: {describe(run)}")
                sides[side].append(run)

    def parity_counts(self, reference: TrialEndpoint, candidate: TrialEndpoint) -> tuple[int, int]:
        """(prompts that agree, prompts) of the parity suite; ParityError when it cannot run."""
        verdict = run_parity(reference.url, candidate.url, self.setup.suite, self.setup.parity)
        return verdict.passed, verdict.total

    def parity(self, row: Row, reference: TrialEndpoint, candidate: TrialEndpoint) -> Row:
        mode = self.setup.parity.mode
        try:
            passed, total = self.parity_counts(reference, candidate)
        except ParityError as exc:  # a suite that did not run is never a pass (nor reused)
            return self._rejected(row, f"parity did not run: {exc}")
        agreed = f"{passed} of {total} prompts agree"
        if passed < total:
            update = {"parity": f"fail ({mode}, {agreed})", "parity_passed": False}
            return self._rejected(
                row.model_copy(update=update), f"parity: {total - passed}/{total} prompts differ"
            )
        return row.model_copy(
            update={
                "status": Status.VERIFIED,
                "parity": f"pass ({mode}, {agreed})",
                "parity_passed": True,
            }
        )

    def _inconclusive(self, row: Row, why: str) -> Row:
        """Undecided (noise, or runs that were no evidence): retriable, never rejected."""
        update = {"status": Status.INCONCLUSIVE, "reason": why, "retry": self.setup.retry(row.id)}
        return row.model_copy(update=update)

    def _rejected(self, row: Row, why: str, parity: bool | None = None) -> Row:
        update: dict[str, Any] = {"status": Status.REJECTED, "reason": why}
        if parity is not None:
            update["parity_passed"] = parity
        return row.model_copy(update=update)


def describe(run: Run) -> str:
    """`12.3 req/s/GPU … at 24 req/s (3 runs)` for the messages."""
    tried = f" ({len(run.tried)} run{'' if len(run.tried) == 1 else 's'})" if run.tried else ""
    rate = f" at {rounded(run.rate)} req/s" if run.rate is not None else ""
    if run.client_behind:
        return f"no evidence{rate}{tried}: {run.miss}"
    if run.miss is not None:
        return f"misses the target{rate}{tried}: {run.miss}"
    figure = f"{run.goal:,.4g}" if run.goal is not None else "…"
    return f"{figure}{rate}{tried}, meets the target"
