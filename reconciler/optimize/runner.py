"""Adapter: the optimizer's loop for one RELEASE/STAGE — `denv optimize start`.

1. The current release is deployed on the stage's first fleet's trial GPUs and stays up for
   the whole run: measured once on the traffic (the baseline: its capacity search, see
   capacity.py), it is then the reference of every verification and parity check.
2. The study (study.py, optuna, seeded with the pre-screen's predictions) asks for a
   candidate, one at a time, until `max_trials` trials have run or the space is done.
3. Each candidate is deployed on trial GPUs beside it (within the budget), its capacity
   searched from the baseline's (trials.py: the traffic open loop at a speed, a run that
   clearly misses the latency target stopping early) and screened: it must hold the target
   at some rate and beat the baseline, and any verified candidate, by more than
   `rules.min_gain`.
4. One that passes is verified while its trial is still up: both are measured
   `rules.repeats` times, interleaved (a repeat searches again near the side's capacity:
   `Ladder.near`), the gain's interval decides (verify.py), then the
   parity suite runs against the current release. A run in which the load generator fell
   behind its schedule is no evidence (candidates.evidence): it is measured again, never
   averaged in. A gain within noise takes one more run of each side at a time, up to
   `verify.most_runs`; still undecided, the candidate is `inconclusive` (not rejected), with
   the command that verifies it again (`--verify`, `Loop.reverify`: no trial spent). A
   parity failure rejects it however fast, and rejects without a trial every later
   candidate with the same answer levers.
5. The study is told each outcome; a parity failure, its own or a shared one, is a rejection
   (`Study.reject`: infeasible for TPE, the reason kept). With `auto`, each verified winner
   better than the last one promoted becomes (or updates) the pull request.

Every step writes the candidates file (state.py) at once, so `denv optimize candidates` shows
the study as it goes. The caller hands in drivers, the promote hook and the messages.
"""

from __future__ import annotations

from typing import Any

from reconciler.errors import DenvError, UsageError
from reconciler.optimize.candidates import (
    Row,
    Run,
    Status,
    StudyState,
    evidence,
    retriable,
    status_text,
)
from reconciler.optimize.capacity import rounded
from reconciler.optimize.heartbeat import beating
from reconciler.optimize.measuring import Measuring, StudyStopped, describe
from reconciler.optimize.space import Candidate, ReleaseEdit
from reconciler.optimize.verify import Gain, answer_levers, gain_interval, percent, promising
from reconciler.spec.recipe import Recipe
from reconciler.trials.deployment import TrialEndpoint


class Loop(Measuring):
    """The search: the study asks, each candidate is trialed, screened, verified, told."""

    def baseline(self, reference: TrialEndpoint) -> Run:
        """The current release's capacity run, measured now when the state has none."""
        runs = self.state.current.runs
        if runs and runs[0].goal is not None and not runs[0].client_behind:
            return runs[0]
        run = self.evidence_run(reference, "current", self.ladder())
        if run.client_behind:
            raise DenvError(
                f"the current release's baseline is no evidence: {run.miss}. The machine is "
                "too busy to measure it; run the same command again when it is quieter"
            )
        if run.goal is None:
            raise DenvError(f"the current release measured nothing on the traffic: {run.miss}")
        self.save(current=self.state.current.model_copy(update={"runs": [run]}))
        self.fx.say(f"current: {describe(run)}")
        return run

    # -- the loop ---------------------------------------------------------------------------
    def run(self) -> StudyState:
        """The current release stays deployed on trial GPUs for the whole study: the
        baseline, every verification and every parity check use that one deployment. With
        `auto`, a verified winner of an earlier run not yet promoted is promoted first; a
        study whose trials are spent deploys nothing."""
        if self.setup.auto:
            best = self.best_verified()
            if best is not None and best.pr is None:
                self.promote(best)
        if self.setup.verify is not None:
            return self.reverify(self.setup.verify)
        if self.setup.study.trials_used() >= self.setup.max_trials:
            return self.state
        self.fx.say(f"deploying the current release ({self.current_recipe.id}) on trial GPUs")
        with self.deploy(self.current_recipe) as reference:
            baseline = self.baseline(reference)
            study = self.setup.study
            while study.trials_used() < self.setup.max_trials:
                self.fx.progress("trials", study.trials_used(), self.setup.max_trials)
                self.check_stop()
                asked = study.ask()  # repeats and infeasible suggestions never come back
                if asked is None:
                    self.fx.say("the search space is exhausted")
                    break
                trial, candidate = asked
                self.save(trials=study.trials_used())
                self.trial(trial, candidate, baseline, reference)
            self.fx.progress("trials", study.trials_used(), self.setup.max_trials)
        return self.state

    def predicted(self, candidate: Candidate) -> float | None:
        """The pre-screen's goal figure for the candidate (simulator's model), if any."""
        scored = self.setup.study.screened.get(candidate.id)
        return scored.value if scored is not None else None

    def model_disagrees(self, candidate: Candidate, run: Run, baseline: float) -> bool:
        """Whether a first run that met the target but is not better than the current
        release contradicts the simulator's model, which predicts a gain above `min_gain`:
        on a busy machine one run is noise enough, so the verification's repeats decide."""
        mine, current = self.predicted(candidate), self.predicted(self.current)
        if run.miss is not None or run.goal is None or mine is None or not current:
            return False
        min_gain = self.setup.rules.min_gain
        measured_better = promising(baseline, run.goal, self.up, min_gain)
        return not measured_better and promising(current, mine, self.up, min_gain)

    def known_failure(self, answers: str) -> Row | None:
        return next(
            (r for r in self.state.candidates if r.parity_passed is False and r.answers == answers),
            None,
        )

    def trial(
        self, trial: Any, candidate: Candidate, baseline: Run, reference: TrialEndpoint
    ) -> None:
        """One candidate: trial, screen, verify (`trial` is the study's optuna trial)."""
        edit = self.setup.space.release_edit(candidate)
        recipe = self.setup.space.recipe_of(candidate)
        row = Row(
            id=candidate.id,
            change=candidate.change,
            recipe=edit.recipe,
            overrides=edit.overrides,
            topology=edit.topology,
            gpus=candidate.gpus,
            answers=answer_levers(recipe),
            predicted=self.predicted(candidate),
            trial=trial.number,
            at=self.fx.clock(),
        )
        study = self.setup.study
        failed = self.known_failure(row.answers or "")
        if failed is not None:  # it would fail parity too: no trial GPU spent on it
            why = f"parity: fails as {failed.id} ({row.answers})"
            study.reject(trial, why)  # the study turns away from it; it costs no trial
            row = self._rejected(row, why, parity=False).model_copy(
                update={"parity": failed.parity}
            )
            self.save(row)
            self.fx.say(f"  {row.id} {row.change}: {status_text(row)}")
            return
        self.save(row)
        self.fx.say(f"trial {row.trial}: {row.id} {row.change} on {row.gpus} GPU(s)")

        try:
            with beating(trial):  # workers sharing the study see this one is alive
                row = self.on_trial_gpus(trial, candidate, recipe, row, baseline, reference)
        except StudyStopped:
            raise
        except DenvError as exc:
            study.tell(trial, None, f"trial failed: {exc}")
            row = self._rejected(row, f"trial failed: {exc}")
        self.ended(row)

    def ended(self, row: Row) -> None:
        """A candidate's verdict: saved, said (with the retry of an inconclusive one) and,
        verified with `auto`, promoted."""
        self.save(row)
        self.fx.say(f"  {row.id}: {status_text(row)}")
        if row.retry is not None:
            self.fx.say(f"  verify {row.id} again: {row.retry}")
        if row.status is Status.VERIFIED and self.setup.auto:
            self.promote(row)

    def reverify(self, candidate: str) -> StudyState:
        """`--verify CANDIDATE`: verify an inconclusive candidate again, beside a fresh
        deployment of the current release, without a trial (the study is not asked); one
        verified already is left as it is."""
        row = self.state.row(candidate)
        if row is not None and row.status is Status.VERIFIED:
            self.fx.say(f"{row.id} is {status_text(row)} already: nothing to verify")
            return self.state
        if row is None or not retriable(row):  # continuing.check_retry refused it already
            raise UsageError(f"--verify {candidate}: not an inconclusive candidate")
        edit = ReleaseEdit(row.recipe or self.current_recipe.id, row.overrides, row.topology)
        recipe = self.setup.space.recipe_of_edit(edit)
        self.fx.say(f"verifying {row.id} {row.change} again, beside the current release")
        with self.deploy(self.current_recipe) as reference:
            baseline = self.baseline(reference)
            with self.deploy(recipe) as endpoint:
                # near its own capacity; a candidate with no run that is evidence: the baseline's
                start = next((r.speed for r in evidence(row.runs) if r.speed), baseline.speed)
                cleared: dict[str, Any] = {"runs": [], "gain": None, "retry": None, "reason": None}
                fresh = row.model_copy(update={**cleared, "status": Status.TRIALING})
                self.save(fresh)
                done = self.verify(fresh, endpoint, reference, start)
        self.ended(done)
        return self.state

    def on_trial_gpus(
        self,
        trial: Any,
        candidate: Candidate,
        recipe: Recipe,
        row: Row,
        baseline: Run,
        reference: TrialEndpoint,
    ) -> Row:
        """Deploy, search its capacity from the baseline's, screen, verify; tell the study."""
        study = self.setup.study
        with self.deploy(recipe) as endpoint:
            run = self.evidence_run(endpoint, f"{row.id} run 1", self.ladder(baseline.speed))
            self.fx.say(f"  {row.id}: {describe(run)}")
            outcome = self.outcome(run, candidate.gpus)
            row = row.model_copy(update={"runs": [run]})
            if run.client_behind:  # no evidence either way: neither screened nor told
                study.tell(trial, None, f"no evidence: {run.miss}")
                return self._inconclusive(row, f"no evidence: {run.miss}")
            first = self.first_look(run, baseline)
            row = row.model_copy(update={"gain": first})
            why = self.screen(run, first)
            figure = self.state.current.mean("goal") or baseline.goal or 0.0
            if why is not None and self.model_disagrees(candidate, run, figure):
                self.fx.say(f"  {row.id}: {why}, but the model predicts a gain: verifying it")
                why = None  # one run against the model's prediction: the repeats decide
            if why is not None:
                study.tell(trial, outcome)
                return self._rejected(row, why)
            self.save(row)
            row = self.verify(row, endpoint, reference)
        if row.parity_passed is False:  # never a good region, however fast
            study.reject(trial, row.reason or "parity failed", outcome)
        else:
            study.tell(trial, outcome)
        return row

    def best_verified(self) -> Row | None:
        verified = [r for r in self.state.candidates if r.status is Status.VERIFIED and r.gain]
        return max(verified, key=lambda r: r.gain.gain if r.gain else 0.0, default=None)

    def first_look(self, run: Run, baseline: Run) -> Gain | None:
        """The candidate's one run against the current release's figure (the mean of its runs
        so far): the comparison the screen decides on, kept on the row (the table and the
        reason show it) until verification's repeats replace it. None when either side
        measured nothing."""
        current = self.state.current.mean("goal") or baseline.goal
        if run.miss is not None or run.goal is None or not current or current <= 0:
            return None
        return gain_interval([current], [run.goal], self.up)

    def screen(self, run: Run, first: Gain | None) -> str | None:
        """Why one run rules the candidate out before verification, or None."""
        if run.miss is not None:
            early = "stopped early: " if run.stopped_early else ""
            at = f" at every rate tried, down to {rounded(run.rate)} req/s" if run.rate else ""
            return f"{early}misses the target{at}: {run.miss}"
        if run.goal is None:
            return "measured nothing"
        rules, sign = self.setup.rules, (1.0 if self.up else -1.0)
        if first is not None and first.gain <= rules.min_gain:
            return f"not better: {percent(first.gain)} vs current"
        best = self.best_verified()
        figure = best.mean("goal") if best is not None else None
        if best is not None and figure and not promising(figure, run.goal, self.up, rules.min_gain):
            gain = percent(sign * (run.goal - figure) / figure)
            return f"not better than verified {best.id}: {gain}"
        return None

    def promote(self, row: Row) -> None:
        """`auto`: a verified winner better than the last one promoted becomes the PR."""
        if self.fx.promote is None or row.gain is None:
            return
        shipped = [r for r in self.state.candidates if r.pr is not None and r.gain is not None]
        if any(r.gain is not None and r.gain.gain >= row.gain.gain for r in shipped):
            return
        number = self.fx.promote(self.state, row)
        self.save(row.model_copy(update={"pr": number}))
        self.fx.say(f"  {row.id}: pull request #{number}")
