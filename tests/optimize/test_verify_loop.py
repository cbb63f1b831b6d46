"""The optimizer's loop with its trial GPUs scripted (deployments and runs are fakes of our
own; the space, pre-screen, optuna study, verification and state are the real ones): what it
trials, verifies, rejects and promotes, and what the study learns."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reconciler.errors import UsageError
from reconciler.fleet.drivers.registry import Drivers
from reconciler.optimize.candidates import Row, Run, Status, StudyState, table
from reconciler.optimize.capacity import Ladder
from reconciler.optimize.measuring import Effects, Setup
from reconciler.optimize.runner import Loop
from reconciler.optimize.space import Candidate
from reconciler.optimize.start import StartOptions, resolve, retry_command
from reconciler.optimize.state import StateStore
from reconciler.optimize.verify import percent
from reconciler.spec.loader import open_repo
from reconciler.spec.recipe import Recipe
from reconciler.spec.result import Metrics, Percentiles
from reconciler.trials.deployment import TrialEndpoint
from reconciler.trials.plan import ProbeInfo
from tests.conftest import ROOT, Edit

AT = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)


def shape_trace(root: Path) -> Path:
    """48 requests 50 ms apart, 600 tokens in and 16 out, sharing one prefix block."""
    trace = root / "shape.jsonl"
    rows = (
        {"timestamp": 50 * i, "input_length": 600, "output_length": 16, "hash_ids": [1, 100 + i]}
        for i in range(48)
    )
    trace.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return trace


class ScriptedLoop(Loop):
    """Trial GPUs that answer from a script: max_batch 4 holds the target up to 100 requests/s
    on its one GPU, anything larger 200 (fp8 KV 220, and 3 of 20 parity prompts differ)."""

    def __init__(self, setup: Setup, effects: Effects, state: StudyState) -> None:
        super().__init__(setup, effects, state)
        self.deployed: list[Recipe] = []
        self.runs = 0
        self.ladders: list[Ladder] = []

    @contextlib.contextmanager
    def deploy(self, recipe: Recipe) -> Iterator[TrialEndpoint]:
        self.deployed.append(recipe)
        yield TrialEndpoint(
            trial=str(len(self.deployed)), url=f"http://fake/{len(self.deployed) - 1}",
            model="m", weights="w", engine="sim", units={}, hosts={}, gpus=1, simulated=True,
            probe=ProbeInfo(), ready_s=0.0,
        )  # fmt: skip

    def recipe(self, endpoint: TrialEndpoint) -> Recipe:
        return self.deployed[int(endpoint.url.rsplit("/", 1)[1])]

    def measure(self, endpoint: TrialEndpoint, label: str, ladder: Ladder) -> Run:
        settings = self.recipe(endpoint).settings
        figure = 100.0 if settings.max_batch == 4 else 200.0
        figure += 20.0 if settings.kv_cache.dtype == "fp8" else 0.0
        self.runs += 1
        figure += self.runs % 3 - 1  # a little run-to-run noise
        self.ladders.append(ladder)
        metrics = Metrics(ttft_ms=Percentiles(p99=300.0), requests=32)
        return Run(metrics=metrics, goal=figure, rate=figure, speed=figure / 20)

    def parity_counts(self, reference: TrialEndpoint, candidate: TrialEndpoint) -> tuple[int, int]:
        assert self.recipe(reference).settings.max_batch == 4  # always against the current
        return (17, 20) if self.recipe(candidate).settings.kv_cache.dtype == "fp8" else (20, 20)


def test_the_loop_verifies_a_winner_and_keeps_fp8_out(denv_repo: Path, edit: Edit) -> None:
    edit("releases/chat-8b/denv.yaml", "settings: { max_batch: 128 }", "settings: { max_batch: 4 }")
    edit("policies/optimizer.yaml", "max_trials: 40", "max_trials: 6")
    trace = shape_trace(denv_repo)
    repo = open_repo(denv_repo)
    store = StateStore(denv_repo / "state")
    options = StartOptions(
        target="chat-8b/canary", goal="throughput", budget_gpus=4, auto=True, traffic=trace,
        levers=["max_batch", "kv_dtype"], seed=1,
    )  # fmt: skip
    setup, state = resolve(denv_repo, repo, options, store, AT)
    promoted: list[str] = []

    def promote(study: StudyState, row: Row) -> int:
        promoted.append(row.id)
        return 7

    effects = Effects(store=store, drivers=Drivers(), promote=promote, clock=lambda: AT)
    loop = ScriptedLoop(setup, effects, state)
    final = loop.run()

    assert store.load("chat-8b", "canary") == final  # every step was saved
    assert final.trials == setup.study.trials_used() <= 6
    assert loop.deployed[0] == loop.current_recipe  # the current release, deployed first
    assert loop.deployed.count(loop.current_recipe) == 1  # and only once
    rows = {r.id: r for r in final.candidates}
    verified = [r for r in rows.values() if r.status is Status.VERIFIED]
    assert len(verified) == 1 and verified[0].pr == 7 and promoted == [verified[0].id]
    winner = verified[0]
    assert "fp8" not in winner.change and winner.parity == "pass (tolerant, 20 of 20 prompts agree)"
    assert winner.gain is not None and winner.gain.low > 0.9  # about +100%, three runs each
    assert len(winner.runs) == 3

    fp8 = [r for r in rows.values() if "fp8" in r.change]
    checked = [r for r in fp8 if r.runs]
    assert len(checked) == 1  # one fp8 candidate ran parity; no other was deployed
    assert checked[0].reason == "parity: 3/20 prompts differ" and checked[0].pr is None
    for other in fp8:  # never verified: parity failed, its own or a reused one, or slower
        assert other.status is Status.REJECTED and other.parity_passed is not True
        assert other is checked[0] or (other.reason or "").startswith(
            (f"parity: fails as {checked[0].id}", "not better")
        )
    deployed_fp8 = [r for r in loop.deployed if r.settings.kv_cache.dtype == "fp8"]
    assert len(deployed_fp8) == 1
    # the study learnt each parity failure as a rejection, with its reason; those without
    # a trial cost none
    told = {
        t.user_attrs["candidate"]: t.user_attrs["reason"]
        for t in setup.study.study.get_trials()
        if t.user_attrs.get("rejected")
    }
    assert told == {r.id: r.reason for r in fp8 if r.parity_passed is False}
    assert sum(1 for r in rows.values() if r.runs) == final.trials
    # the baseline, then three runs beside each of the two verified: the winner and that fp8
    assert len(final.current.runs) == 1 + 3 + 3
    # the baseline's search starts at the traffic's own rate; a candidate's at the baseline's
    # capacity; a verification repeat's near the side's own, one grid step at a time
    assert loop.ladders[0].start == 1.0 and loop.ladders[0].factor == 16
    assert loop.ladders[1].start == final.current.runs[0].speed
    assert {ladder.factor for ladder in loop.ladders[2:]} >= {2}

    later = [r for r in rows.values() if r.status is Status.REJECTED and "fp8" not in r.change]
    assert all((r.reason or "").startswith(f"not better than verified {winner.id}") for r in later)

    # one comparison per row, computed once: the goal's cell shows the gain the row carries
    # (its verification's, or its one run's against the current release), and a reason that
    # names a gain against the current release names that one
    cells = {cells[0]: cells[2] for cells in table(final)}
    for each in final.candidates:
        if each.gain is not None:
            assert f"(gain {percent(each.gain.gain)} vs " in cells[each.id]
        said = re.search(r"not better: (\S+) vs current", each.reason or "")
        if said is not None:
            assert each.gain is not None and said.group(1) == percent(each.gain.gain)


def test_starting_a_finished_study_again(denv_repo: Path, edit: Edit) -> None:
    """A larger --max-trials continues it; --auto promotes its verified winner without a
    trial; an explicit --max-trials that allows no trial is refused; other --levers are a new
    study, named so."""
    edit("releases/chat-8b/denv.yaml", "settings: { max_batch: 128 }", "settings: { max_batch: 4 }")
    edit("policies/optimizer.yaml", "max_trials: 40", "max_trials: 2")
    trace = shape_trace(denv_repo)
    repo = open_repo(denv_repo)
    store = StateStore(denv_repo / "state")
    promoted: list[str] = []

    def start(**changes: object) -> tuple[ScriptedLoop, StudyState]:
        given: dict[str, Any] = {
            "target": "chat-8b/canary", "goal": "throughput", "budget_gpus": 4,
            "traffic": trace, "levers": ["max_batch"], "seed": 1, **changes,
        }  # fmt: skip
        setup, state = resolve(denv_repo, repo, StartOptions(**given), store, AT)

        def promote(study: StudyState, row: Row) -> int:
            promoted.append(row.id)
            return 9

        effects = Effects(store=store, drivers=Drivers(), promote=promote, clock=lambda: AT)
        loop = ScriptedLoop(setup, effects, state)
        final = loop.run().model_copy(update={"state": "finished"})
        store.save(final)  # as `denv optimize start` leaves a study that ran to its end
        return loop, final

    _, first = start()
    assert first.trials == 2 and first.study.endswith(".levers-max_batch")
    (winner,) = [r for r in first.candidates if r.status is Status.VERIFIED]
    assert winner.pr is None and promoted == []

    again, promoted_now = start(auto=True)  # no trial left: promote only, deploy nothing
    assert again.deployed == [] and promoted == [winner.id]
    assert promoted_now.study == first.study and promoted_now.row(winner.id).pr == 9  # type: ignore[union-attr]

    with pytest.raises(UsageError, match="--max-trials 2 allows no more: give more than 2"):
        start(max_trials=2)

    more_loop, more = start(max_trials=3)  # the same study, one more trial
    assert more.study == first.study and more.trials == 3
    assert len(more_loop.deployed) == 2  # the current release and the one new candidate
    assert {r.id for r in first.candidates} < {r.id for r in more.candidates}

    wider_loop, wider = start(levers=["max_batch", "kv_dtype"])
    assert wider.study != first.study and wider.study.endswith(".levers-kv_dtype+max_batch")
    assert wider.levers == ["kv_dtype", "max_batch"] and wider.trials == 2
    assert len(wider_loop.deployed) >= 1 + 1  # a study of its own, trialed from the start


class FlatLoop(ScriptedLoop):
    """Every candidate measures what the current release does, give or take 1%."""

    def measure(self, endpoint: TrialEndpoint, label: str, ladder: Ladder) -> Run:
        run = super().measure(endpoint, label, ladder)
        figure = 100.0 + (self.runs % 3 - 1)
        return run.model_copy(update={"goal": figure, "rate": figure, "speed": figure / 20})

    def predicted(self, candidate: Candidate) -> float | None:
        return None  # no model figure to overrule one run: each is screened on its first run


def test_a_candidate_screened_out_shows_the_gain_its_reason_names(
    denv_repo: Path, edit: Edit
) -> None:
    """One run against the current release (or the repeats, where the model disagreed): the
    reason's gain and the table's are one
    comparison, kept on the row (the table showed the run's own change, rounded apart)."""
    edit("releases/chat-8b/denv.yaml", "settings: { max_batch: 128 }", "settings: { max_batch: 4 }")
    edit("policies/optimizer.yaml", "max_trials: 40", "max_trials: 2")
    trace = shape_trace(denv_repo)
    store = StateStore(denv_repo / "state")
    options = StartOptions(
        target="chat-8b/canary", goal="throughput", budget_gpus=4, traffic=trace,
        levers=["max_batch"], seed=1,
    )  # fmt: skip
    setup, state = resolve(denv_repo, open_repo(denv_repo), options, store, AT)
    final = FlatLoop(setup, Effects(store=store, drivers=Drivers(), clock=lambda: AT), state).run()
    cells = {cells[0]: cells[2] for cells in table(final)}
    assert final.candidates
    for each in final.candidates:  # screened after one run, or verified when the model disagreed
        said = re.search(r"^(?:not better: (\S+) vs current|gain (\S+) is not above .*)$",
                         each.reason or "")  # fmt: skip
        assert said is not None, each.reason
        shown = said.group(1) or said.group(2)
        assert each.gain is not None and shown == percent(each.gain.gain)
        assert each.gain.runs == (1 if said.group(1) else 3)
        vs = f"{each.gain.current_mean:,.2f}"
        assert cells[each.id] == f"{each.gain.candidate_mean:,.2f} (gain {shown} vs {vs})"
    assert any(each.gain and each.gain.runs == 1 for each in final.candidates)


class BusyLoop(ScriptedLoop):
    """The scripted trial GPUs on a busy machine: the runs numbered in `behind` are ones in
    which the load generator fell behind (a low figure, a TTFT far outside the target);
    `noisy`: the candidate's figures swing ±150 around 200 from run to run."""

    behind: frozenset[int] = frozenset()
    noisy = False

    def measure(self, endpoint: TrialEndpoint, label: str, ladder: Ladder) -> Run:
        run = super().measure(endpoint, label, ladder)
        if self.noisy and self.recipe(endpoint).settings.max_batch != 4:
            swing = 150.0 if self.runs % 4 == 2 else -150.0  # 350, 50, 350, …
            run = run.model_copy(update={"goal": 200.0 + swing})
        if self.runs in self.behind:
            miss = "the load generator sent 30.6 of the 34.6 requests/s its schedule asked"
            metrics = Metrics(ttft_ms=Percentiles(p99=1811.0), requests=32)
            update = {"goal": 10.0, "metrics": metrics, "miss": miss, "client_behind": True}
            run = run.model_copy(update=update)
        return run


def busy_start(
    denv_repo: Path, edit: Edit, store: StateStore
) -> Any:  # a start(loop class, **options) -> (loop, final state)
    edit("releases/chat-8b/denv.yaml", "settings: { max_batch: 128 }", "settings: { max_batch: 4 }")
    trace = shape_trace(denv_repo)
    repo = open_repo(denv_repo)

    def start(kind: type[BusyLoop], **changes: object) -> tuple[BusyLoop, StudyState]:
        given: dict[str, Any] = {
            "target": "chat-8b/canary", "goal": "throughput", "budget_gpus": 4, "traffic": trace,
            "levers": ["max_batch"], "seed": 1, "max_trials": 1, **changes,
        }  # fmt: skip
        setup, state = resolve(denv_repo, repo, StartOptions(**given), store, AT)
        effects = Effects(store=store, drivers=Drivers(), clock=lambda: AT)
        loop = kind(setup, effects, state)
        final = loop.run().model_copy(update={"state": "finished"})
        store.save(final)
        return loop, final

    return start


def test_a_run_whose_load_generator_fell_behind_is_measured_again_never_averaged(
    denv_repo: Path, edit: Edit
) -> None:
    """Runs 3 and 4 (the first verification repeat of each side) measured the client: they are
    kept and said, measured again, and left out of the gain and of every figure shown."""

    class Behind(BusyLoop):
        behind = frozenset({3, 4})

    store = StateStore(denv_repo / "state")
    _, final = busy_start(denv_repo, edit, store)(Behind)
    (winner,) = final.candidates
    assert winner.status is Status.VERIFIED, winner.reason
    assert [r.client_behind for r in final.current.runs] == [False, True, False, False, False]
    assert [r.client_behind for r in winner.runs] == [False, True, False, False]
    assert winner.gain is not None and winner.gain.runs == 3
    assert winner.gain.current_mean == pytest.approx(100.0, abs=1.0)  # never the 10.0
    assert final.current.mean("ttft_p99") == 300.0 and winner.mean("ttft_p99") == 300.0


def test_an_inconclusive_verification_says_so_and_its_retry_verifies_it(
    denv_repo: Path, edit: Edit
) -> None:
    """A gain within noise takes more runs, up to twice `repeats`; still undecided, the
    candidate is inconclusive (not rejected) with the command that verifies it again — which
    works on the same study even though `--max-trials 1` is spent."""

    class Noisy(BusyLoop):
        noisy = True

    store = StateStore(denv_repo / "state")
    start = busy_start(denv_repo, edit, store)
    _, first = start(Noisy)
    (row,) = first.candidates
    assert row.status is Status.INCONCLUSIVE and "within noise" in (row.reason or "")
    assert (row.reason or "").endswith("after 6 runs each")  # repeats 3, at most 6
    assert len(row.runs) == 6 and row.gain is not None and row.gain.low <= 0 < row.gain.gain
    assert row.retry == (
        f"denv optimize start chat-8b/canary --budget-gpus 4 --traffic {denv_repo}/shape.jsonl "
        f"--levers max_batch --seed 1 --verify {row.id}"
    )
    retry = f"{row.id} is inconclusive: `{row.retry}` verifies it again"
    with pytest.raises(UsageError, match="--max-trials 1 allows no more") as refused:
        start(Noisy)  # a plain rerun trials nothing more, and says what does ...
    assert retry in str(refused.value)
    with pytest.raises(UsageError, match="only an inconclusive candidate"):
        start(Noisy, verify="c-000000")
    again, second = start(BusyLoop, verify=row.id)  # ... its retry verifies it, no trial spent
    (verified,) = second.candidates
    assert verified.status is Status.VERIFIED and verified.retry is None
    assert second.trials == first.trials == 1
    assert len(verified.runs) == 3 and len(again.deployed) == 2
    twice, third = start(BusyLoop, verify=row.id)  # the same retry again: nothing to do
    assert twice.deployed == [] and third.candidates == second.candidates


def test_the_retry_command_is_the_one_the_optimizer_guide_prints() -> None:
    """The guide's walk runs the retry exactly as `start` prints it for the walk's options."""
    options = StartOptions(
        target="chat-8b/canary", goal="throughput", budget_gpus=4, levers=["speculative"],
        max_trials=1, requests=48, seed=1, parity_suite="parity-short.jsonl",
    )  # fmt: skip
    printed = retry_command(options, "c-462245")
    guide = (ROOT / "docs" / "optimize.md").read_text().splitlines()
    assert printed in guide  # the guide's sh step
    assert f"    verify c-462245 again: {printed}" in guide  # the output it shows


def test_a_candidate_whose_first_run_is_no_evidence_is_inconclusive(
    denv_repo: Path, edit: Edit
) -> None:
    """The candidate's first run, and both of its retries, measured the client: neither
    screened out nor rejected, but inconclusive, and its retry verifies it."""

    class Behind(BusyLoop):
        behind = frozenset({2, 3, 4})

    store = StateStore(denv_repo / "state")
    start = busy_start(denv_repo, edit, store)
    _, first = start(Behind)
    (row,) = first.candidates
    assert row.status is Status.INCONCLUSIVE and len(row.runs) == 1
    assert (row.reason or "").startswith("no evidence: the load generator sent 30.6")
    assert row.retry is not None and row.retry.endswith(f"--verify {row.id}")
    _, second = start(BusyLoop, verify=row.id)
    assert second.candidates[0].status is Status.VERIFIED


def test_one_run_against_the_models_prediction_does_not_reject_alone(
    denv_repo: Path, edit: Edit
) -> None:
    """The candidate's first run came out below the current release (a busy machine), while
    the simulator's model predicts it far better: the verification's repeats decide."""

    class Unlucky(BusyLoop):
        def measure(self, endpoint: TrialEndpoint, label: str, ladder: Ladder) -> Run:
            run = super().measure(endpoint, label, ladder)
            return run.model_copy(update={"goal": 97.0}) if self.runs == 2 else run

    store = StateStore(denv_repo / "state")
    _, final = busy_start(denv_repo, edit, store)(Unlucky)
    (row,) = final.candidates
    assert row.runs[0].goal == 97.0  # not better, alone
    # the outlier widens the interval: more runs than `repeats` decide it
    assert row.status is Status.VERIFIED and 3 < len(row.runs) <= 6, row.reason
