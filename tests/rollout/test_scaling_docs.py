"""docs/scaling.md's examples run as printed, in a fresh clone (scripts/walk_guides.py's
sandbox), and `denv sim capacity` answers as the page says."""

from __future__ import annotations

import json
import subprocess
import sys

from scripts.walk_guides import ROOT, walk_guide


def test_the_scaling_docs_examples_run_as_printed() -> None:
    outcomes = walk_guide("docs/scaling.md")
    assert [o.command.text.split()[:3] for o in outcomes] == [
        ["denv", "sim", "capacity"],
        ["denv", "sim", "predict"],
    ]
    assert [o.problems for o in outcomes] == [[], []], [o.stderr[-2000:] for o in outcomes]
    assert "replicas: { min: 1, max: 3, policy: default }" in outcomes[0].stdout
    assert json.loads(outcomes[1].stdout)["simulated"] is True


def denv(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "reconciler", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )


def test_capacity_bounds_follow_the_peak_and_trough() -> None:
    base = ("sim", "capacity", "--recipe", "llama-3.1-8b/vllm@1", "--workload", "chat")
    done = denv(*base, "--hardware", "h200", "--peak", "100", "--trough", "30", "--json")
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    per_replica = found["per_replica_rps"]
    assert per_replica == found["capacity_rps"] * found["target_utilization"]
    assert found["bounds"]["max"] * per_replica >= 100 > (found["bounds"]["max"] - 1) * per_replica
    assert found["bounds"]["min"] * per_replica >= 30 > (found["bounds"]["min"] - 1) * per_replica


def test_an_unknown_policy_is_refused() -> None:
    done = denv(
        "sim",
        "capacity",
        "--recipe",
        "llama-3.1-8b/vllm@1",
        "--workload",
        "chat",
        "--policy",
        "nope",
    )
    assert done.returncode == 1
    assert "no scaling policy 'nope' (known: default)" in done.stderr
    assert "Traceback" not in done.stderr
