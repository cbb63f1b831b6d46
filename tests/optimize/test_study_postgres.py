"""Workers sharing one study in a real PostgreSQL: two worker processes ask and tell at the
same time, and no candidate gets two trials (a worker marks its pick, then looks for
another's mark on it)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator

import optuna
import pytest
from optuna.trial import TrialState

from reconciler.optimize.study import TRIAL, Study
from tests.conftest import ROOT
from tests.optimize import spaces
from tests.optimize.postgres import postgres_server

TRIALS_EACH = 6


@pytest.fixture(scope="module")
def postgres() -> Iterator[str]:
    with postgres_server() as url:
        yield url


def test_two_workers_at_once_never_trial_one_candidate_twice(postgres: str) -> None:
    name = "chat-8b/prod.throughput.shared"
    argv = [sys.executable, "-m", "tests.optimize.study_worker", postgres, name, str(TRIALS_EACH)]
    workers = [
        subprocess.Popen(
            argv, cwd=ROOT, text=True,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )
        for _ in range(2)
    ]  # fmt: skip
    for worker in workers:
        assert worker.stdout is not None and worker.stderr is not None
        if worker.stdout.readline() != "ready\n":
            worker.wait(60)
            pytest.fail(f"a worker did not start: {worker.stderr.read()[-3000:]}")
    for worker in workers:  # each has its study: now both ask at once
        assert worker.stdin is not None
        worker.stdin.write("go\n")
        worker.stdin.flush()
    answers = [w.communicate(timeout=300) for w in workers]
    for worker, (_, err) in zip(workers, answers, strict=True):
        assert worker.returncode == 0, err
    picked = [json.loads(out) for out, _ in answers]
    print(f"worker picks: {picked}")
    assert all(picked), picked  # both got trials
    every = [c for mine in picked for c in mine]
    assert len(every) == len(set(every)), Counter(every).most_common(3)
    # what the storage says: each candidate measured by one trial only
    storage = f"postgresql+psycopg://{postgres.split('://', 1)[1]}"
    trials = optuna.load_study(study_name=name, storage=storage).get_trials(deepcopy=False)
    measured = [
        t.user_attrs["candidate"]
        for t in trials
        if t.user_attrs.get("kind") == TRIAL and t.state == TrialState.COMPLETE
    ]
    assert sorted(measured) == sorted(every)
    again = Study(postgres, name, spaces.space(levers=["parallel"], budget=4), "throughput", None)
    assert again.trials_used() == len(every)
