"""`denv status` (the real CLI) on an elastic stage: planned at the count the bot keeps in its
lease note, its bounds, what is pending and why, and `--events`, every decision with the
signal values behind it. No engine runs: the note is written as a bot would leave it."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from reconciler.fleet.hostagent import AgentClient
from reconciler.fleet.transport import LocalTransport
from reconciler.reconcile.snapshot import LEASE
from reconciler.rollout.state import RolloutState
from tests.reconcile.conftest import GitRepo, git_repo
from tests.rollout.test_status_cli import denv
from tests.ui.looked import reconcile, stop_units

__all__ = ["git_repo"]  # the fixture

RELEASE = "releases/chat-8b/denv.yaml"
KEY = "chat-8b/canary/local"
WHY = "26 req/s over 9.7 per replica"
SIGNALS = {"serving": 1, "arrival_rps": 26.0, "waiting": 3.0, "kv_usage": 0.45, "firing": [],
           "capacity_rps": 9.7, "note": ""}  # fmt: skip


def scaling_note(at: float) -> dict[str, Any]:
    """What a bot keeps after scaling the canary 1 → 2 → 4 (a minute apart)."""
    events = [
        {"at": at - 120, "from": 1, "to": 2, "reason": "3 requests waiting on a replica",
         **SIGNALS, "arrival_rps": 9.0},
        {"at": at - 60, "from": 2, "to": 4, "reason": WHY, **SIGNALS},
    ]  # fmt: skip
    deployment = {"changed_at": at - 60, "up_since": None, "down_since": None,
                  "decided_at": at - 5, "events": events, "count": 4, "reason": WHY,
                  "signals": SIGNALS}  # fmt: skip
    rollout = RolloutState(checked_at=at - 5).model_dump(mode="json")
    scaling = {"version": 1, "counters": {}, "deployments": {KEY: deployment}}
    return {"checks": {"rollout": rollout, "scaling": scaling}, "at": at - 5,
            "summary": "planned +0 (a bot pass)"}  # fmt: skip


def leave_note(env: dict[str, str], note: dict[str, Any]) -> None:
    agent = AgentClient(LocalTransport(env=env), python=sys.executable)
    agent.lease(LEASE, "a-bot", 600, note=note)
    agent.lease(LEASE, "a-bot", 0, release=True, note=note)


def make_elastic(repo: GitRepo) -> None:
    """The canary keeps 1 to 8 replicas; the local fleet has 3 GPUs free (13 for trials)."""
    bounds = "  - name: canary\n    replicas: {min: 1, max: 8}\n"
    repo.replace(RELEASE, "  - name: canary\n", bounds)
    repo.replace("fleets/local.yaml", "trial_gpus: 8", "trial_gpus: 13")
    repo.commit("chat-8b: the canary elastic, 1 to 8 replicas")


def test_status_shows_an_elastic_stage_at_the_count_the_bot_keeps(
    git_repo: GitRepo, tmp_path: Path
) -> None:
    env = {**os.environ, "DENV_HOME": str(tmp_path / "home"), "DENV_CACHE": str(git_repo.cache)}
    env |= {"COLUMNS": "200"}
    env.pop("DENV_REPO", None)
    leave_note(env, scaling_note(time.time()))
    # a fixed count: the row and the text as before (nothing about scaling)
    fixed = json.loads(denv(git_repo, env, "status", "--json"))["deployments"]
    assert [(r["stage"], r["replicas"], r["scale"], r["bounds"]) for r in fixed] == [
        ("canary", 2, None, None)
    ]
    assert (fixed[0]["pending_replicas"], fixed[0]["scaling"]) == (0, None)
    text = denv(git_repo, env, "status")
    assert "0/2 " in text and "replicas" not in text and "(1–8)" not in text

    # elastic between 1 and 8; 3 GPUs free: the bot's 4 are 3 placed and 1 pending
    make_elastic(git_repo)
    [row] = json.loads(denv(git_repo, env, "status", "--json"))["deployments"]
    assert row["bounds"] == {"min": 1, "max": 8, "policy": "default", "pool": "fleet"}
    assert (row["replicas"], row["pending_replicas"]) == (3, 1)
    assert row["scale"] == "3 (1–8), 1 pending"
    assert row["scaling"]["reason"] == WHY and row["scaling"]["signals"] == SIGNALS
    assert row["drift"] == "start 4"  # nothing runs yet: its 3 replicas and the router
    text = denv(git_repo, env, "status")
    canary = next(line for line in text.splitlines() if " canary " in line)
    assert "0/3 (1–8) +1 pending" in canary, text
    assert f"{KEY}: replicas 3 (1–8), 1 pending: {WHY}; the pending" in text, text

    events = json.loads(denv(git_repo, env, "status", "--events", "--json"))["events"]
    assert [(e["deployment"], e["from"], e["to"], e["reason"]) for e in events] == [
        (KEY, 1, 2, "3 requests waiting on a replica"),
        (KEY, 2, 4, WHY),
    ]
    assert events[1]["arrival_rps"] == 26.0 and events[1]["capacity_rps"] == 9.7
    lines = denv(git_repo, env, "status", "--events").splitlines()
    assert len(lines) == 2 and lines[0] < lines[1]  # oldest first, by their time stamps
    assert lines[1].endswith(
        f"  {KEY}: 2 → 4: {WHY} (arrival 26 req/s, capacity 9.7 req/s per replica, "
        "waiting 3, KV 45%, 1 serving)"
    ), lines


def test_a_count_inside_the_bounds_is_never_drift(git_repo: GitRepo, tmp_path: Path) -> None:
    """A bot runs the canary at 3 (its minimum then); git lowers the minimum to 1: the 3
    replicas that run are inside the new bounds, what the bot keeps, not drift — though the
    release's topology says 2."""
    env = {**os.environ, "DENV_HOME": str(tmp_path / "home"), "DENV_CACHE": str(git_repo.cache)}
    env.pop("DENV_REPO", None)
    bounds = "  - name: canary\n    replicas: {min: 3, max: 8}\n"
    git_repo.replace(RELEASE, "  - name: canary\n", bounds)
    git_repo.commit("chat-8b: the canary elastic, 3 to 8 replicas")
    try:
        reconcile(git_repo.path, git_repo.cache, tmp_path / "home")
        git_repo.replace(RELEASE, "{min: 3, max: 8}", "{min: 1, max: 8}")
        git_repo.commit("chat-8b: the canary down to 1 replica when idle")
        [row] = json.loads(denv(git_repo, env, "status", "--json"))["deployments"]
        assert (row["replicas"], row["scale"], row["drift"]) == (3, "3 (1–8)", ""), row  # none
        assert row["scaling"] is not None and row["scaling"]["reason"]  # the bot's decision
    finally:
        stop_units(tmp_path / "home")
