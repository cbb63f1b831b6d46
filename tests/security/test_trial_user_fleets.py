"""A pull request's code never runs as the agent's user: on a fleet whose trial engines would
(a Slurm fleet, whose jobs run as the user who submits them, or one with `trial_user: null`),
a pull request's bench starts nothing and dials no host, unless the default branch's PR policy
names the fleet in `agent_user_fleets`."""

from __future__ import annotations

import json
from pathlib import Path

from reconciler.forge.local import LocalForge
from tests.forge.conftest import git_repo
from tests.forge.gitrepo import commit_file
from tests.pr.test_plan import denv
from tests.pr.test_trust import Listener, hostile_fleet, listener
from tests.security.test_pr_policy import RELEASE, pull_request

__all__ = ["git_repo", "listener"]


def test_a_fleet_without_a_trial_user_runs_no_pull_request_trial(
    git_repo: Path, listener: Listener
) -> None:
    shared = hostile_fleet(listener.port).replace("simulated: true", "simulated: false")
    shared = shared.replace("  trial_gpus: 8\n", "  trial_gpus: 8\n  trial_user: null\n")
    commit_file(git_repo, "fleets/local.yaml", shared, "an SSH fleet whose trials share a user")
    bigger = (git_repo / RELEASE).read_text().replace("max_batch: 128", "max_batch: 192")
    pull_request(git_repo, "bigger", {RELEASE: bigger})

    planned = denv(git_repo, "plan", "--pr", "1", "--json")  # observes the fleet's hosts
    observed = listener.accepted
    benched = denv(git_repo, "bench", "--pr", "1", "--requests", "2", "--json")

    assert planned.returncode == 0, planned.stderr
    assert listener.accepted == observed, benched.stderr  # no trial dialled the host
    [run] = json.loads(benched.stdout)["runs"]
    assert "has no trial_user: its trial engines run as the agent's user" in run["error"]
    [bench] = [
        c.body for c in LocalForge(git_repo).comments(1) if c.body.startswith("<!-- denv:bench")
    ]
    assert "never runs as the agent's user" in bench

    accept = "pr:\n  agent_user_fleets: [local]\n"
    commit_file(git_repo, "policies/pr.yaml", accept, "trials on local may share the user")
    denv(git_repo, "bench", "--pr", "1", "--requests", "2", "--json")
    assert listener.accepted > observed  # accepted by the default branch: the trial dials
