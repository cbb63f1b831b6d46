"""`denv parity run` against a release's stage as it runs and a recipe deployed for the run on
trial GPUs (then torn down): simulator engines over sshd in a network namespace."""

from __future__ import annotations

import json

from tests.e2e.test_reconcile import Lab, fleet_file, lab
from tests.labs.sshd import ssh_lab
from tests.reconcile.conftest import git_repo

__all__ = ["git_repo", "lab", "ssh_lab"]  # fixtures


def test_a_stage_against_a_recipe_on_trial_gpus(lab: Lab) -> None:
    text = fleet_file("lab", lab.servers["lab"], lab.ssh).replace(
        "simulated: true\n", "simulated: true\n  trial_gpus: 2\n"
    )
    lab.repo.write("fleets/lab.yaml", text)
    lab.release(replicas=1)
    lab.reconcile()
    done = lab.denv(
        "parity", "run", "--reference", "chat-8b/canary",
        "--candidate", "llama-3.1-8b/sglang@1", "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    verdict = json.loads(done.stdout)
    assert verdict["headline"] == "PARITY 512/512"
    assert "trial" in done.stderr  # deployed for the run …
    assert not [u.id for u in lab.units() if u.id.startswith("trial-")]  # … and torn down
    missing = lab.denv("parity", "run", "--reference", "chat-8b/prod", "--candidate", "x/y@1")
    assert missing.returncode == 1 and "no such stage running" in missing.stderr
