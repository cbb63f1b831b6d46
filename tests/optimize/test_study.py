"""The study: optuna in RDB storage, the pre-screen's picks first, real trials counted apart
from suggestions told without one, the latency target as a constraint, rejections (a parity
failure) as infeasible."""

from __future__ import annotations

from pathlib import Path

import pytest
from optuna.trial import TrialState

from reconciler.catalog.latency import parse_latency_target
from reconciler.errors import DenvError
from reconciler.optimize.goal import Served
from reconciler.optimize.heartbeat import ALIVE, STALE_S, beating, stale
from reconciler.optimize.outcome import Outcome
from reconciler.optimize.prescreen import Scored, prescreen, promising
from reconciler.optimize.space import Candidate, SearchSpace
from reconciler.optimize.study import (
    REJECTED,
    REJECTED_MISS,
    SCREEN_MISS,
    SCREENED,
    TRIAL,
    Study,
)
from reconciler.optimize.workload import Workload
from reconciler.spec.result import Metrics, Percentiles, TrafficLine
from tests.fleet.conftest import wait_for
from tests.optimize import spaces

TARGET = parse_latency_target("ttft:p99<400ms")
# 10 requests a second, 512 tokens in and 64 out, replayed open loop by the capacity search
WORK = Workload(
    lines=[
        TrafficLine(timestamp=100 * i, input_length=512, output_length=64, hash_ids=[1000 + i])
        for i in range(60)
    ],
    goal="throughput",
    target=TARGET,
    requests=30,
    run_s=1.0,
)


@pytest.fixture(scope="module")
def space() -> SearchSpace:
    return spaces.space(levers=["parallel"], budget=4)


@pytest.fixture(scope="module")
def screened(space: SearchSpace) -> list[Scored]:
    grid = list(space.grid())
    return prescreen(space, grid, WORK)


def measured(screened: list[Scored], candidate: Candidate) -> Outcome:
    """'Measuring' a candidate here is its prediction (simulated)."""
    outcome = next(s.outcome for s in screened if s.candidate.id == candidate.id)
    assert outcome is not None
    return outcome


def outcome(ttft_p99_ms: float, goodput_gpu: float = 1000.0, requests: int = 40) -> Outcome:
    """A measured outcome on two GPUs: `goodput_gpu` requests/s per GPU at capacity."""
    return Outcome(
        metrics=Metrics(ttft_ms=Percentiles(p99=ttft_p99_ms), requests=requests),
        gpus=2,
        served=Served(rate=2 * goodput_gpu, goodput_rps=2 * goodput_gpu, output_tok_s=1.0),
    )


def test_the_most_promising_predictions_are_trialed_first(
    space: SearchSpace, screened: list[Scored]
) -> None:
    study = Study(None, "first", space, "throughput", TARGET, screened=screened, seed=1)
    picks = [s.candidate.id for s in promising(screened, "throughput")]
    first = [study.ask() for _ in range(3)]
    assert [asked[1].id for asked in first if asked] == picks[:3]


def test_each_candidate_once_then_none(space: SearchSpace, screened: list[Scored]) -> None:
    study = Study(None, "all", space, "throughput", TARGET, screened=screened, max_trials=30)
    tried: list[str] = []
    while (asked := study.ask()) is not None:
        trial, candidate = asked
        tried.append(candidate.id)
        study.tell(trial, measured(screened, candidate))
    trials = study.study.get_trials()
    skipped = {t.user_attrs["candidate"] for t in trials if t.user_attrs["kind"] == SCREENED}
    assert sorted(tried + sorted(skipped)) == sorted(s.candidate.id for s in screened)
    for s in screened:
        assert (s.candidate.id in skipped) == (s.violation > SCREEN_MISS)
    assert study.trials_used() == len(tried)
    best = study.best()
    kept = [s for s in screened if s.candidate.id not in skipped]
    assert sorted(r.candidate.id for r in best) == sorted(s.candidate.id for s in kept)
    assert [r.value for r in best] == [s.value for s in kept]  # best first, as predicted
    assert all(r.meets for r in best)  # at capacity: every layout holds the target there
    assert best[0].predicted == screened[0].value


def test_the_budget_counts_real_trials_only(space: SearchSpace) -> None:
    study = Study(None, "budget", space, "throughput", TARGET, max_trials=3, seed=2)
    for _ in range(3):
        asked = study.ask()
        assert asked is not None
        study.tell(asked[0], outcome(300))
    assert study.ask() is None
    kinds = [t.user_attrs.get("kind") for t in study.study.get_trials()]
    assert kinds.count(TRIAL) == 3


def test_a_missed_target_ranks_after_every_met_one(space: SearchSpace) -> None:
    study = Study(None, "target", space, "throughput", TARGET, seed=3)
    fast_but_late, slower = study.ask(), study.ask()
    assert fast_but_late is not None and slower is not None
    study.tell(fast_but_late[0], outcome(900, goodput_gpu=5000))
    study.tell(slower[0], outcome(300, goodput_gpu=1000))
    best = study.best()
    assert [r.candidate.id for r in best] == [slower[1].id, fast_but_late[1].id]
    assert best[1].violation == pytest.approx(900 / 400 - 1)


def test_a_failed_trial_is_not_ranked(space: SearchSpace) -> None:
    study = Study(None, "failed", space, "throughput", TARGET, seed=4)
    asked = study.ask()
    assert asked is not None
    study.tell(asked[0], None, reason="the engine never became ready")
    (trial,) = study.study.get_trials()
    assert trial.state == TrialState.FAIL
    assert trial.user_attrs["reason"] == "the engine never became ready"
    assert study.best() == []


def test_a_rejected_candidate_is_infeasible_and_never_trialed_again(
    space: SearchSpace, screened: list[Scored]
) -> None:
    study = Study(None, "rejected", space, "throughput", TARGET, screened=screened, seed=5)
    asked = study.ask()
    assert asked is not None
    fast = outcome(300, goodput_gpu=5000)  # meets the target and is the fastest: parity alone
    study.reject(asked[0], "parity: 3/20 prompts differ", fast)
    (trial,) = study.study.get_trials()
    assert (trial.state, trial.value) == (TrialState.COMPLETE, 5000)
    assert trial.constraints == {
        "latency_target": REJECTED_MISS
    }  # what TPE reads: far outside the target
    assert trial.user_attrs["reason"] == "parity: 3/20 prompts differ"
    assert trial.user_attrs["kind"] == TRIAL and study.trials_used() == 1  # it had its trial
    assert [(r.candidate.id, r.meets) for r in study.best()] == [(asked[1].id, False)]
    later: list[str] = []
    while (again := study.ask()) is not None:
        later.append(again[1].id)
        study.tell(again[0], measured(screened, again[1]))
    assert later and asked[1].id not in later
    told_again = [t for t in study.study.get_trials() if t.user_attrs.get("kind") == REJECTED]
    assert all(t.user_attrs["candidate"] == asked[1].id for t in told_again)


def test_a_rejection_without_a_trial_costs_no_trial(space: SearchSpace) -> None:
    study = Study(None, "shared-failure", space, "throughput", TARGET, max_trials=1, seed=6)
    asked = study.ask()
    assert asked is not None
    study.reject(asked[0], "parity: fails as c-123456")
    (trial,) = study.study.get_trials()
    assert (trial.state, trial.user_attrs["kind"]) == (TrialState.PRUNED, REJECTED)
    assert trial.constraints == {"latency_target": REJECTED_MISS}
    assert study.trials_used() == 0 and study.best() == []
    following = study.ask()  # the budget is intact
    assert following is not None and following[1].id != asked[1].id


@pytest.mark.parametrize(
    ("ttft_p99_ms", "requests", "stop"),
    [(1000, 40, True), (450, 40, False), (1000, 5, False), (300, 40, False)],
    ids=["clearly-missing", "just-over", "too-few-requests", "meeting"],
)
def test_stop_early_only_when_clearly_missing(
    space: SearchSpace, ttft_p99_ms: float, requests: int, stop: bool
) -> None:
    study = Study(None, "early", space, "throughput", TARGET)
    asked = study.ask()
    assert asked is not None
    assert study.should_stop_early(asked[0], outcome(ttft_p99_ms, requests=requests)) is stop


def test_a_stopped_trial_is_pruned_and_counts(space: SearchSpace) -> None:
    study = Study(None, "pruned", space, "throughput", TARGET, max_trials=1)
    asked = study.ask()
    assert asked is not None
    study.prune(asked[0], outcome(2000))
    (trial,) = study.study.get_trials()
    assert trial.state == TrialState.PRUNED
    assert study.ask() is None


def test_workers_share_one_study_in_sqlite(
    space: SearchSpace, screened: list[Scored], tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'optimize.db'}"
    first = Study(url, "chat-8b/prod", space, "throughput", TARGET, screened=screened)
    asked = first.ask()
    assert asked is not None
    first.tell(asked[0], measured(screened, asked[1]))
    second = Study(url, "chat-8b/prod", space, "throughput", TARGET, screened=screened)
    assert [r.candidate.id for r in second.best()] == [asked[1].id]
    again = second.ask()  # the next promising pick: the first is taken
    assert again is not None
    assert again[1].id == promising(screened, "throughput")[1].candidate.id
    assert second.trials_used() == 2


def test_a_storage_error_never_shows_the_password(space: SearchSpace) -> None:
    with pytest.raises(DenvError) as error:
        Study("postgresql://denv:s3cret@127.0.0.1:1/optuna", "x", space, "throughput", None)
    assert "s3cret" not in str(error.value)
    assert "denv:***@127.0.0.1:1/optuna" in str(error.value)


def test_a_trial_whose_run_died_is_failed_and_frees_its_candidate(
    space: SearchSpace, screened: list[Scored], tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'optimize.db'}"
    died = Study(url, "chat-8b/prod", space, "throughput", TARGET, screened=screened)
    asked = died.ask()  # then the process is killed: the trial is never told
    assert asked is not None
    trial, held = asked
    later = Study(url, "chat-8b/prod", space, "throughput", TARGET, screened=screened, seed=1)
    assert later.abandon([trial.number, 999]) == [trial.number]
    assert later.abandon([trial.number]) == []  # failed once
    assert later.study.trials[trial.number].state == TrialState.FAIL
    assert later.trials_used() == 1  # its GPU time was spent
    # no longer "being trialed": it is picked again, and gets a trial
    got = later.ask()
    while got is not None and got[1].id != held.id:
        later.tell(got[0], measured(screened, got[1]))
        got = later.ask()
    assert got is not None and got[1].id == held.id
    assert not any(t.user_attrs.get("kind") == "running" for t in later.study.trials)


def test_a_trial_whose_heartbeat_stopped_frees_its_candidate(
    space: SearchSpace, screened: list[Scored], tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'optimize.db'}"
    now = [1_800_000_000.0]
    died = Study(
        url, "shared", space, "throughput", TARGET, screened=screened, clock=lambda: now[0]
    )
    asked = died.ask()  # stamped alive now; then its worker dies and stamps no more
    assert asked is not None
    trial, held = asked
    other = Study(url, "shared", space, "throughput", TARGET, screened=screened, seed=1,
                  clock=lambda: now[0])  # fmt: skip
    assert other.fail_stale() == []  # alive: its stamp is fresh
    now[0] += STALE_S + 1
    assert other.fail_stale() == [trial.number]
    assert other.study.trials[trial.number].state == TrialState.FAIL
    got = other.ask()
    while got is not None and got[1].id != held.id:
        other.tell(got[0], measured(screened, got[1]))
        got = other.ask()
    assert got is not None and got[1].id == held.id  # picked again, and trialed


def test_a_running_trial_is_stamped_until_its_block_ends() -> None:
    stamps: list[float] = []
    ticks = iter(range(1000))

    class Trial:
        def set_user_attr(self, key: str, value: object) -> None:
            assert key == ALIVE and isinstance(value, float)
            stamps.append(value)

    with beating(Trial(), every=0.01, clock=lambda: float(next(ticks))):
        wait_for(lambda: len(stamps) >= 3, timeout=10, what="three beats")
    after = len(stamps)
    assert stamps[:3] == [0.0, 1.0, 2.0]
    assert stale(0.0, STALE_S + 1) and not stale(0.0, STALE_S) and not stale(None, 1e12)
    assert len(stamps) == after  # no beat once the block ended
