"""The optimizer's efficiency benchmark, CI-sized: the study (with the pre-screen) needs fewer
trials than random search to land within 3% of the grid's best."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import ROOT


def test_the_study_beats_random_search_on_median() -> None:
    done = subprocess.run(
        [sys.executable, "benchmarks/optimizer_efficiency.py", "--quick", "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["seeds"] == 5
    (row,) = report["rows"]
    assert row["candidates"] > 100 and 0 < row["hits"] < row["candidates"]
    assert report["median"]["study"] < report["median"]["random"]
