"""Adapter: the optimizer's study — optuna (TPE with the latency target as a constraint) in
its RDB storage: a SQLite file by default, any SQLAlchemy URL (postgresql://…) so that several
workers share one study. The only module that imports optuna.

Which suggestions become real trials: the pre-screen's most promising predictions go first,
then every other trial; TPE suggests the rest, and a suggestion is told to optuna without a
trial when the space refuses it (infeasible), when it was measured already (its figures are
repeated), when it is being trialed, when it was rejected already, or when the pre-screen
predicts it clearly bad. Only real trials count against max_trials. A candidate ruled out
whatever its figures (a parity failure) is told with `reject`: infeasible for TPE's constraint,
its reason kept with the trial.
"""

from __future__ import annotations

import json
import time
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import optuna
import sqlalchemy.exc
from optuna.trial import FrozenTrial, TrialState
from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_random

from reconciler.catalog.latency import LatencyTarget
from reconciler.errors import DenvError
from reconciler.optimize.goal import Goal, higher_is_better
from reconciler.optimize.heartbeat import ALIVE, stale
from reconciler.optimize.outcome import MISSED, Outcome, beats, clearly_misses, violation
from reconciler.optimize.prescreen import Scored, promising, ranked
from reconciler.optimize.space import Candidate, Infeasible, SearchSpace

# optuna logs every trial at INFO; denv reports trials itself.
optuna.logging.set_verbosity(optuna.logging.WARNING)

# Real trials and the rest, as each optuna trial's user attribute "kind" says.
TRIAL, INFEASIBLE, REPEAT, SCREENED = "trial", "infeasible", "repeat", "screened"
RUNNING = "running"  # being trialed elsewhere: told failed, which TPE leaves out
REJECTED = "rejected"  # ruled out without a trial (it shares a parity failure): no GPU used
# A rejected candidate lies as far outside the constraint as a suggestion the space refuses:
# TPE turns away from its region, however good its figures.
REJECTED_MISS = 2 * MISSED
# A suggestion the pre-screen predicts this far outside the latency target (0.5: 50% over
# a limit), or below this share of the best prediction's goal figure, gets no trial.
SCREEN_MISS = 0.5
SCREEN_SHARE = 0.5
SUGGESTIONS_PER_ASK = 16  # then the best prediction not yet tried, else a random candidate
PROMISING_EVERY = 2  # after the first picks, every other trial is the next promising one
UNTRIED_DRAWS = 200  # random candidates looked at for one not yet tried
STARTUP_TRIALS = 5  # TPE's random start; enqueued predictions count among them


@dataclass(frozen=True)
class Ranked:
    """A measured candidate, as `best()` lists it."""

    candidate: Candidate
    trial: int  # optuna's trial number
    value: float  # the goal's figure
    violation: float  # <= 0: met the latency target
    predicted: float | None  # the pre-screen's figure, when it predicted this candidate

    @property
    def meets(self) -> bool:
        return self.violation <= 0


class Study:
    """One optimization of a release on a fleet: what to trial next, and what was learnt."""

    def __init__(
        self,
        storage: str | None,
        name: str,
        space: SearchSpace,
        goal: Goal,
        target: LatencyTarget | None,
        *,
        screened: Sequence[Scored] = (),
        max_trials: int | None = None,
        seed: int | None = None,
        seed_top: int = 3,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """`storage`: an SQLAlchemy URL (sqlite:///path.db, postgresql://…), None to keep the
        study in memory. `screened`: the pre-screen's predictions; the `seed_top` most
        promising (prescreen.promising: best figure within the model's margin of the target,
        alike predictions once) are trialed first, then one every other trial. `max_trials`:
        real trials (default: the rules')."""
        self.space, self.goal, self.target = space, goal, target
        self.clock = clock  # Unix time: heartbeats from workers on other machines compare
        self.max_trials = max_trials or space.rules.max_trials
        self.screened = {s.candidate.id: s for s in ranked(screened, goal)}
        self.promising = promising(screened, goal)
        with warnings.catch_warnings():  # multivariate and grouped TPE are "experimental"
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            sampler = optuna.samplers.TPESampler(
                seed=seed,
                n_startup_trials=STARTUP_TRIALS,
                multivariate=True,
                group=True,
                constant_liar=True,  # workers in parallel: a running trial counts as poor
            )
        try:
            self.study = optuna.create_study(
                storage=_storage(storage),
                study_name=name,
                sampler=sampler,
                direction="maximize" if higher_is_better(goal) else "minimize",
                load_if_exists=True,
            )
        except Exception as exc:  # SQLAlchemy's errors: a bad URL, a missing driver
            raise DenvError(f"optuna storage {_redacted(storage)}: {exc}") from exc
        self.seed_top = seed_top

    # ------------------------------------------------------------------ asking
    def trials_used(self) -> int:
        return sum(1 for t in self._trials() if t.user_attrs.get("kind") == TRIAL)

    def ask(self) -> tuple[optuna.Trial, Candidate] | None:
        """The next candidate to trial; None when the budget is spent or the space is done.
        The first `seed_top` trials, then every other one, take the most promising prediction
        not yet tried; TPE picks the rest. Trials whose worker died first let their candidates
        go (`fail_stale`)."""
        self.fail_stale()
        used = self.trials_used()
        if used >= self.max_trials:
            return None
        if used < self.seed_top or used % PROMISING_EVERY == 1:
            current = self.space.current().id
            picked = self._first_untried(
                [s.candidate for s in self.promising if s.candidate.id != current]
            )
            if picked is not None:
                return picked
        for _ in range(SUGGESTIONS_PER_ASK):
            trial = self.study.ask()
            built = self.space.build(self.space.suggest_values(trial))
            if isinstance(built, Infeasible):
                self._skip(trial, INFEASIBLE, built.reason, 2 * MISSED)
                continue
            rejected = self._rejected().get(built.id)
            if rejected is not None:  # told again, without a trial
                self._skip(trial, REJECTED, rejected, REJECTED_MISS, candidate=built)
                continue
            done = self._measured().get(built.id)
            if done is not None:
                self._repeat(trial, built, done)
                continue
            if built.id in self._running():  # another worker (or caller) trials it now
                self._mark(trial, built, RUNNING)
                self.study.tell(trial, state=TrialState.FAIL)
                continue
            screened_out = self._screened_out(built)
            if screened_out is not None:
                self._skip(trial, SCREENED, *screened_out, candidate=built)
                continue
            if self._claimed(trial, built):
                return trial, built
        # TPE keeps suggesting what is known: the best prediction not yet tried, else any.
        predicted = [s.candidate for s in self.screened.values() if s.outcome is not None]
        drawn = self.space.sample(UNTRIED_DRAWS, seed=used)
        return self._first_untried([*predicted, *drawn])

    def _first_untried(
        self, candidates: Sequence[Candidate]
    ) -> tuple[optuna.Trial, Candidate] | None:
        """The first candidate no trial has had, asked of optuna with its values."""
        tried = {t.user_attrs.get("candidate") for t in self._trials() if _holds(t)}
        for candidate in candidates:
            if candidate.id in tried:
                continue
            self.study.enqueue_trial(dict(candidate.choices))
            trial = self.study.ask()  # takes the enqueued values
            built = self.space.build(self.space.suggest_values(trial))
            if isinstance(built, Candidate) and built.id not in tried:
                if self._claimed(trial, built):
                    return trial, built
                continue
            self.study.tell(trial, state=TrialState.FAIL)
        return None

    def _claimed(self, trial: optuna.Trial, candidate: Candidate) -> bool:
        """Mark `trial` as trialing `candidate`, then look for another trial holding it
        (`_holds`), running or done since this worker last looked: then let it go (told
        failed, as trialed elsewhere) and say False.
        Each worker marks before it looks, so of workers picking one candidate at once at
        most one keeps it; all may let it go, and it is picked again later."""
        self._mark(trial, candidate, TRIAL)
        rivals = [
            t.number
            for t in self._trials()
            if t.number != trial.number
            and t.user_attrs.get("kind") == TRIAL
            and t.user_attrs.get("candidate") == candidate.id
            and _holds(t)
        ]
        if not rivals:
            return True
        trial.set_user_attr("kind", RUNNING)
        self.study.tell(trial, state=TrialState.FAIL)
        return False

    def _screened_out(self, candidate: Candidate) -> tuple[str, float] | None:
        scored = self.screened.get(candidate.id)
        if scored is None or scored.value is None:
            return None
        if scored.violation > SCREEN_MISS:
            return f"predicted to miss the target: {scored.reason}", scored.violation
        best = next(iter(self.screened.values()))
        if best.meets and best.value is not None:
            floor = best.value * SCREEN_SHARE if higher_is_better(self.goal) else best.value
            worse = (
                scored.value < floor
                if higher_is_better(self.goal)
                else scored.value > floor / SCREEN_SHARE
            )
            if worse:
                return f"predicted {scored.value:.4g}, the best prediction {best.value:.4g}", 0.0
        return None

    def _mark(self, trial: optuna.Trial, candidate: Candidate, kind: str) -> None:
        trial.set_user_attr("kind", kind)
        trial.set_user_attr(ALIVE, self.clock())  # the worker's heartbeat goes on from here
        trial.set_user_attr("candidate", candidate.id)
        trial.set_user_attr("overrides", json.dumps(candidate.overrides, sort_keys=True))
        trial.set_user_attr("change", candidate.change)
        trial.set_user_attr("gpus", candidate.gpus)
        trial.set_user_attr("choices", json.dumps(dict(candidate.choices)))
        scored = self.screened.get(candidate.id)
        if scored is not None and scored.value is not None:
            trial.set_user_attr("predicted", scored.value)

    def _skip(
        self,
        trial: optuna.Trial,
        kind: str,
        reason: str,
        miss: float,
        candidate: Candidate | None = None,
    ) -> None:
        """Told as pruned, so TPE learns the region is poor; no GPU was used."""
        if candidate is not None:
            self._mark(trial, candidate, kind)
            scored = self.screened.get(candidate.id)
            if scored is not None and scored.value is not None:
                trial.report(scored.value, step=0)
        trial.set_user_attr("kind", kind)
        trial.set_user_attr("reason", reason)
        _constrain(trial, miss)
        self.study.tell(trial, state=TrialState.PRUNED)

    def _repeat(self, trial: optuna.Trial, candidate: Candidate, done: FrozenTrial) -> None:
        self._mark(trial, candidate, REPEAT)
        if "reason" in done.user_attrs:
            trial.set_user_attr("reason", done.user_attrs["reason"])
        _constrain(trial, float(done.user_attrs.get("constraint", MISSED)))
        self.study.tell(trial, done.value)

    # ------------------------------------------------------------------ telling
    def tell(self, trial: optuna.Trial, outcome: Outcome | None, reason: str | None = None) -> None:
        """A trial's measured outcome; None (with the reason) when the trial failed. One
        that misses the latency target is told as infeasible (optuna's constraint)."""
        value = outcome.value(self.goal) if outcome is not None else None
        if outcome is None or value is None:
            trial.set_user_attr("reason", reason or f"no {self.goal} figure was measured")
            self.study.tell(trial, state=TrialState.FAIL)
            return
        self._record(trial, outcome)
        self.study.tell(trial, value)

    def reject(self, trial: optuna.Trial, reason: str, outcome: Outcome | None = None) -> None:
        """Rule the trial's candidate out whatever its figures (a parity failure): told as
        infeasible for TPE's constraint, `reason` kept in its user attributes, and never
        trialed again. `outcome`: what its trial measured (kept as its value); None when it
        is rejected without a trial, which then does not count against max_trials."""
        trial.set_user_attr("reason", reason)
        trial.set_user_attr("rejected", True)
        if outcome is None:
            trial.set_user_attr("kind", REJECTED)
            _constrain(trial, REJECTED_MISS)
            self.study.tell(trial, state=TrialState.PRUNED)
            return
        self._record(trial, outcome, miss=REJECTED_MISS)
        value = outcome.value(self.goal)
        if value is None:
            self.study.tell(trial, state=TrialState.FAIL)
        else:
            self.study.tell(trial, value)

    def abandon(self, numbers: Iterable[int]) -> list[int]:
        """Fail the trials `numbers` still running: a run of this study that held them died
        (SIGKILL, a lost machine). Until then they read as being trialed, and their
        candidates would never be suggested again. The trials stay counted: their GPU time
        was spent. The numbers failed now."""
        wanted = set(numbers)
        return self._fail_running(lambda t: t.number in wanted)

    def fail_stale(self) -> list[int]:
        """Fail the running trials whose heartbeat stopped (reconciler.optimize.heartbeat):
        another worker's that died. The numbers failed."""
        now = self.clock()
        return self._fail_running(lambda t: stale(t.user_attrs.get(ALIVE), now))

    def _fail_running(self, which: Callable[[FrozenTrial], bool]) -> list[int]:
        failed = [t.number for t in self._trials() if t.state == TrialState.RUNNING and which(t)]
        for number in failed:
            # its worker may tell it in the meantime: then that answer stands
            self.study.tell(number, state=TrialState.FAIL, skip_if_finished=True)
        return failed

    def should_stop_early(self, trial: optuna.Trial, partial: Outcome) -> bool:
        """Whether the figures so far clearly miss the latency target (prune the trial)."""
        return clearly_misses(partial, self.target)

    def prune(self, trial: optuna.Trial, partial: Outcome) -> None:
        """Tell a trial stopped early, with the figures it had."""
        self._record(trial, partial)
        value = partial.value(self.goal)
        if value is not None:
            trial.report(value, step=0)
        trial.set_user_attr("reason", "stopped early: clearly missing the latency target")
        self.study.tell(trial, state=TrialState.PRUNED)

    def _record(self, trial: optuna.Trial, outcome: Outcome, miss: float | None = None) -> None:
        """The outcome's figures, and its constraint: `miss`, else how far it lies outside
        the target (optuna keeps a trial's first constraint: it is set here once)."""
        metrics = outcome.metrics
        _constrain(trial, violation(outcome, self.target) if miss is None else miss)
        trial.set_user_attr("tok_s_gpu", metrics.output_tok_s_per_gpu)
        trial.set_user_attr("goodput_gpu", outcome.value("throughput"))  # at its rate
        trial.set_user_attr("rate", outcome.rate)
        trial.set_user_attr("ttft_p99_ms", metrics.ttft_ms.p99)
        trial.set_user_attr("itl_p99_ms", metrics.itl_ms.p99)
        trial.set_user_attr("simulated", outcome.simulated)

    # ------------------------------------------------------------------ results
    def best(self) -> list[Ranked]:
        """Measured candidates, each once: those meeting the target first, best goal figure
        first; then the rest, nearest the target first."""
        found: dict[str, Ranked] = {}
        for t in self._trials():
            if t.user_attrs.get("kind") != TRIAL or t.state != TrialState.COMPLETE:
                continue
            ranked_trial = self._ranked(t)
            if ranked_trial is None:
                continue
            seen = found.get(ranked_trial.candidate.id)
            if seen is None or beats(self.goal, ranked_trial.value, seen.value):
                found[ranked_trial.candidate.id] = ranked_trial
        sign = -1.0 if higher_is_better(self.goal) else 1.0
        return sorted(
            found.values(),
            key=lambda r: (0, sign * r.value) if r.meets else (1, r.violation),
        )

    def _ranked(self, t: FrozenTrial) -> Ranked | None:
        attrs = t.user_attrs
        if t.value is None or "candidate" not in attrs:
            return None
        candidate = Candidate(
            attrs["candidate"],
            json.loads(attrs.get("overrides", "{}")),
            attrs.get("change", ""),
            int(attrs.get("gpus", 0)),
            json.loads(attrs.get("choices", "{}")),
        )
        return Ranked(
            candidate,
            t.number,
            t.value,
            float(attrs.get("constraint", MISSED)),
            attrs.get("predicted"),
        )

    def _trials(self) -> list[FrozenTrial]:
        return self.study.get_trials(deepcopy=False)

    def _running(self) -> set[str]:
        return {
            str(t.user_attrs["candidate"])
            for t in self._trials()
            if t.state == TrialState.RUNNING
            and t.user_attrs.get("kind") == TRIAL
            and "candidate" in t.user_attrs
        }

    def _rejected(self) -> dict[str, str]:
        """Candidates ruled out by `reject`, with the reason."""
        return {
            str(t.user_attrs["candidate"]): str(t.user_attrs.get("reason", "rejected"))
            for t in self._trials()
            if t.user_attrs.get("rejected") and "candidate" in t.user_attrs
        }

    def _measured(self) -> dict[str, FrozenTrial]:
        return {
            str(t.user_attrs["candidate"]): t
            for t in self._trials()
            if t.state == TrialState.COMPLETE
            and t.user_attrs.get("kind") in (TRIAL, REPEAT)
            and "candidate" in t.user_attrs
        }


def _holds(trial: FrozenTrial) -> bool:
    """Whether the trial keeps its candidate from being picked again: it runs, it was
    measured or told without a trial, or it failed for a reason of the candidate's (its
    engine crashed; a parity failure). Not when it let the candidate go: marked as trialed
    elsewhere, or failed with no reason, as `abandon` leaves the trial of a run that died."""
    if trial.state != TrialState.FAIL:
        return True
    return trial.user_attrs.get("kind") != RUNNING and "reason" in trial.user_attrs


def _constrain(trial: optuna.Trial, miss: float) -> None:
    """The latency target as optuna's constraint (<= 0 met), which TPE samples around; kept
    as a user attribute too, for `best()`."""
    trial.set_constraint("latency_target", miss)
    trial.set_user_attr("constraint", miss)


def _storage(url: str | None) -> optuna.storages.BaseStorage | None:
    if url is None:
        return None
    if url.startswith(("postgresql://", "postgres://")):
        # SQLAlchemy's default PostgreSQL driver is psycopg2; denv's extra installs psycopg 3
        url = "postgresql+psycopg://" + url.split("://", 1)[1]
    if url.startswith("sqlite"):
        # Workers on one SQLite file wait for each other's writes instead of failing.
        return optuna.storages.RDBStorage(url, engine_kwargs={"connect_args": {"timeout": 60}})
    # Workers started together on an empty database race to create optuna's tables: the
    # loser's CREATE fails on what the winner made; asked again, it finds them made.
    for attempt in Retrying(
        # a unique key (IntegrityError) or a table that exists already (ProgrammingError)
        retry=retry_if_exception_type(
            (sqlalchemy.exc.IntegrityError, sqlalchemy.exc.ProgrammingError)
        ),
        stop=stop_after_attempt(4),
        wait=wait_random(0.1, 1.0),
        reraise=True,
    ):
        with attempt:
            return optuna.storages.RDBStorage(url)
    raise AssertionError("tenacity neither returned nor raised")  # pragma: no cover


def _redacted(url: str | None) -> str:
    """The URL without a password (postgresql://user:secret@host/db → user:***@host)."""
    if url is None or "@" not in url or "://" not in url:
        return str(url)
    scheme, rest = url.split("://", 1)
    auth, host = rest.rsplit("@", 1)
    user = auth.split(":", 1)[0]
    return f"{scheme}://{user}:***@{host}"
