"""One optimizer worker for the shared-study test: `python -m tests.optimize.study_worker URL
NAME TRIALS` prints "ready" once it has the study, waits for a line on stdin (so workers
start together), asks the study for up to TRIALS candidates, 'measures' each by its
prediction, and prints the candidate ids it trialed as JSON."""

from __future__ import annotations

import json
import sys

from reconciler.optimize.prescreen import prescreen
from reconciler.optimize.study import Study
from tests.optimize import spaces
from tests.optimize.test_study import TARGET, WORK


def main(url: str, name: str, trials: int) -> None:
    space = spaces.space(levers=["parallel"], budget=4)
    grid = list(space.grid())
    screened = prescreen(space, grid, WORK)
    study = Study(url, name, space, "throughput", TARGET, screened=screened, max_trials=64)
    print("ready", flush=True)
    sys.stdin.readline()
    mine: list[str] = []
    for _ in range(trials):
        asked = study.ask()
        if asked is None:
            break
        trial, candidate = asked
        outcome = next(s.outcome for s in screened if s.candidate.id == candidate.id)
        study.tell(trial, outcome)
        mine.append(candidate.id)
    print(json.dumps(mine))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
