"""benchmarks/slurm_observe.py at its smallest size on the real test cluster: its --json has
every peer's figures at each jobs point and the plan's, and the lab it started is gone."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import require_installed
from tests.labs.slurm import installed

ROOT = Path(__file__).resolve().parent.parent.parent
PEERS = ("driver", "floor", "squeue_each", "scontrol_each", "slurm_call", "login_probe")


def test_smallest_run_reports_every_peer_and_the_plan_and_stops_its_lab() -> None:
    require_installed(installed(), "Slurm (slurmctld, slurmd, slurm-client, munge)")
    argv = [sys.executable, str(ROOT / "benchmarks/slurm_observe.py"), "--jobs", "0,1"]
    argv += ["--repeats", "1", "--plan-repeats", "1", "--replicas", "2", "--json"]
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = process.communicate(timeout=300)
    assert process.returncode == 0, err[-3000:]
    result = json.loads(out)

    assert [row["jobs"] for row in result["observe"]] == [0, 1]
    empty, one = result["observe"]
    for peer in PEERS:
        assert empty[f"{peer}_s"] > 0 and one[f"{peer}_s"] > 0
        assert empty[f"{peer}_per_job_s"] is None and empty[f"{peer}_added_per_job_s"] is None
        assert one[f"{peer}_per_job_s"] == one[f"{peer}_s"]
        assert isinstance(one[f"{peer}_added_per_job_s"], float)
    planned = result["plan"]
    assert (planned["units"], planned["replicas"], planned["counts"]) == (3, 2, [3, 3])
    for key in ("desired_fresh_s", "plan_fresh_s", "desired_steady_s", "plan_steady_s"):
        assert planned[key] > 0
    assert (result["repeats"], result["plan_repeats"]) == (1, 1)
    assert len(result["load_average"]) == 2

    tag = f"dsl{process.pid % 10000}"  # the lab's namespaces (tests/labs/slurm.py)
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert not [line for line in namespaces.splitlines() if line.startswith(tag)], namespaces
