"""`denv rollout status` and `denv status` (the real CLI) on the bot's state as it keeps it in
its lease note on the local fleet's host — a canary rolled back, an override in force until
its rollback PR merges, a promotion waiting for approval. No engine runs: the state is
written as a bot would leave it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from reconciler.fleet.hostagent import AgentClient
from reconciler.fleet.transport import LocalTransport
from reconciler.reconcile.snapshot import LEASE
from reconciler.rollout.state import AlarmValue, Phase, PromotionPr, RolloutState, StageRecord
from tests.reconcile.conftest import GitRepo, git_repo

__all__ = ["git_repo"]  # the fixture

RELEASE = "releases/chat-8b/denv.yaml"
SLOW = AlarmValue(
    name="ttft-p99-1.5s", value=2.4, requests=60, firing=True, text="ttft p99 2.4 s > 1.5 s"
)


def bot_state(good: str, bad: str, checked_at: float) -> RolloutState:
    """The canary rolled back from `bad` to `good` (PR #2 records it); prod at `good`, its
    promotion merged."""
    canary = StageRecord(
        revision=bad, phase=Phase.ROLLED_BACK, good=good, previous=good, override=good,
        rolled_back=bad, reason="ttft p99 2.4 s > 1.5 s", alarms=[SLOW], rollback_pr=2,
        promotion=PromotionPr(number=1, url="u", revision=good, stage="prod", state="merged"),
    )  # fmt: skip
    prod = StageRecord(revision=good, phase=Phase.BAKING, ready_at=time.time() - 60, good=None)
    return RolloutState(
        stages={"chat-8b/canary": canary, "chat-8b/prod": prod},
        rejected={bad: canary.reason},
        checked_at=checked_at,  # the bot's last pass
    )


@pytest.fixture
def rolled_back(
    git_repo: GitRepo, tmp_path: Path
) -> Iterator[tuple[GitRepo, dict[str, str], str, str, float]]:
    good = str(git_repo.git.head.target)
    git_repo.pin("chat-8b", "prod", good)
    git_repo.commit("prod at the first revision")
    git_repo.replace(RELEASE, "max_batch: 128", "max_batch: 64")
    bad = git_repo.commit("max_batch 64")
    env = {**os.environ, "DENV_HOME": str(tmp_path / "home"), "DENV_CACHE": str(git_repo.cache)}
    env.pop("DENV_REPO", None)
    agent = AgentClient(LocalTransport(env=env), python=sys.executable)
    checked_at = time.time() - 125  # the bot's last pass, 125 s before
    state = bot_state(good, bad, checked_at).model_dump(mode="json")
    note = {"checks": {"rollout": state}, "at": time.time(), "summary": "planned +0 (a bot pass)"}
    agent.lease(LEASE, "a-bot", 600, note=note)
    agent.lease(LEASE, "a-bot", 0, release=True, note=note)
    yield git_repo, env, good, bad, checked_at


def denv(repo: GitRepo, env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "reconciler", *args, "--repo", str(repo.path)],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_rollout_status_json_and_text(
    rolled_back: tuple[GitRepo, dict[str, str], str, str, float],
) -> None:
    repo, env, good, bad, checked_at = rolled_back
    answer = json.loads(denv(repo, env, "rollout", "status", "chat-8b", "--json"))
    assert answer["bot"] == "ok"
    assert answer["checked_at"] == checked_at  # the bot's stamp, as it wrote it
    canary, prod = answer["stages"]
    assert (canary["revision"], canary["running"], canary["rollback_pr"]) == (bad, good, 2)
    assert canary["state"].startswith(f"rolled back to {good[:12]} ({bad[:12]} rejected")
    assert canary["alarms"][0]["firing"] and canary["alarms"][0]["value"] == 2.4
    assert (prod["revision"], prod["running"]) == (good, good)
    assert prod["state"].startswith("baking ") and prod["state"].endswith("/30m")
    text = denv(repo, env, "rollout", "status", "chat-8b")
    shown_by = time.time()
    assert "FIRING ttft-p99-1.5s: ttft p99 2.4 s > 1.5 s" in text
    assert "canary: rollback recorded in PR #2" in text
    # The age is the bot's stamp to when the command ran: between 125 s and now, in minutes
    # to one decimal (a busy machine only makes the command later, never the stamp older).
    found = re.search(r"bot: last pass (\d+\.\d)m ago", text)
    assert found is not None, text
    upper = round((shown_by - checked_at) / 60, 1) + 0.05
    assert 2.0 <= float(found[1]) <= upper  # clock-ok: a busy machine only raises `upper`


def test_status_plans_with_the_override_the_bot_runs(
    rolled_back: tuple[GitRepo, dict[str, str], str, str, float],
) -> None:
    repo, env, good, bad, _ = rolled_back
    text = denv(repo, env, "status")
    assert f"rolled back: chat-8b/canary runs {good[:12]} (override until PR #2 merges)" in text
    # the rejected revision is not what the canary should run: only its state names it
    canary = next(line.split() for line in text.splitlines() if " canary " in line)
    assert canary[3] == good[:12], text  # DESIRED
    assert text.count(bad[:12]) == 1 and f"({bad[:12]} rejected:" in text
    assert f"rolled back to {good[:12]}" in text  # STATE, as `rollout status` says it


def test_one_revision_in_status_rollout_status_and_plan(git_repo: GitRepo, tmp_path: Path) -> None:
    """Commits that touch nothing the release uses (a pin, a traffic file) leave the
    canary's revision where it was, the same in all three commands."""
    first = str(git_repo.git.head.target)
    git_repo.pin("chat-8b", "prod", first)
    git_repo.commit("promote to prod (promotions.yaml only)")
    traffic = '{"timestamp": 0, "input_length": 10, "output_length": 5}\n'
    git_repo.write("releases/chat-8b/traffic/prod.jsonl", traffic)
    head = git_repo.commit("recorded traffic (a traffic file only)")
    env = {**os.environ, "DENV_HOME": str(tmp_path / "home"), "DENV_CACHE": str(git_repo.cache)}
    env.pop("DENV_REPO", None)
    status = json.loads(denv(git_repo, env, "status", "--json"))
    assert status["head"] == head
    assert [(d["stage"], d["desired_revision"]) for d in status["deployments"]] == [
        ("canary", first),
        ("prod", first),
    ]
    rollout = json.loads(denv(git_repo, env, "rollout", "status", "chat-8b", "--json"))
    assert [(s["stage"], s["revision"]) for s in rollout["stages"]] == [
        ("canary", first),
        ("prod", first),
    ]
    plan = json.loads(denv(git_repo, env, "plan", "--json"))
    assert [(g["stage"], g["revision"]) for g in plan["groups"]] == [
        ("canary", first),
        ("prod", first),
    ]
