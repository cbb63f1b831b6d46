"""`denv optimize` end to end on the local fleet of simulated GPUs: a release with a
deliberately poor recipe (max_batch 4: four sequences at a time), searched over max_batch and
the KV cache's dtype for goodput per GPU at the highest rate of its traffic that holds the
stage's latency target. The optimizer finds a verified better candidate within its budget,
rejects the fp8-KV candidate it trials (by parity when it beats the winner, else as not
better than it), and with --auto opens a local pull request editing the release's denv.yaml
in place. Merged, the PR flows through the stages as any change does: the bot (`denv reconcile` in a
loop) deploys it to the canary, bakes it, promotes it to prod by an auto-merged promotion PR
and deploys it there. `denv optimize stop` ends a running study: its trials torn down, the
study marked stopped."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pygit2
import pytest
import yaml

from reconciler.fleet.hostagent import AgentClient
from reconciler.fleet.transport import LocalTransport
from reconciler.forge.local import LocalForge
from reconciler.forge.models import PrState
from tests.conftest import ROOT
from tests.fleet.conftest import wait_for
from tests.labs.processes import stop_process
from tests.labs.release import release_yaml, stage
from tests.reconcile.conftest import GitRepo, git_repo

__all__ = ["git_repo"]

POOR = release_yaml(
    stage(
        "canary",
        "local",
        "bake: 2s",
        "alarms: [ttft-p99-1.5s, errors-1pct]   # quiet during the test: not judged, never firing",
    ),
    stage(
        "prod",
        "local",
        "promotion: auto                         # the bot merges the promotion PR into prod",
    ),
    batch=4,
    head="# chat-8b with a deliberately poor recipe: the optimizer should find better.\n",
    note="       # far too small for this traffic",
)
RULES = """\
optimizer:
  max_trials: 3
  repeats: 3
  min_gain: 0.03
  parity: tolerant
"""


def fleet_file() -> str:
    """The local fleet on a loopback address of its own (all of 127/8 is this machine's), so
    its engines' ports never meet those of other processes on 127.0.0.1."""
    address = f"127.{random.randint(1, 254)}.{random.randint(0, 255)}.{random.randint(1, 254)}"
    return (
        "fleet:\n  name: local\n  provider: local\n  hardware: h200\n  simulated: true\n"
        f"  transport: local\n  hosts:\n    - {{ name: localhost, address: {address}, gpus: 8 }}\n"
        "  trial_gpus: 4\n"
    )


@pytest.fixture
def lab(git_repo: GitRepo, tmp_path: Path) -> Iterator[tuple[GitRepo, dict[str, str]]]:
    home = tmp_path / "denv-home"
    env = {**os.environ, "DENV_HOME": str(home), "DENV_CACHE": str(tmp_path / "cache")}
    env.pop("DENV_REPO", None)
    git_repo.write("fleets/local.yaml", fleet_file())
    git_repo.write("releases/chat-8b/denv.yaml", POOR)
    git_repo.write("policies/optimizer.yaml", RULES)
    prompts = (ROOT / "policies/parity/default.jsonl").read_text().splitlines()[:20]
    git_repo.write("policies/parity/default.jsonl", "\n".join(prompts) + "\n")
    shape = (
        json.dumps({"timestamp": 50 * i, "input_length": 600, "output_length": 16,
                    "hash_ids": [1, 100 + i]})
        for i in range(48)
    )  # fmt: skip
    git_repo.write("releases/chat-8b/traffic/canary.jsonl", "\n".join(shape) + "\n")
    git_repo.commit("chat-8b with max_batch 4, its recorded traffic shape")
    yield git_repo, env
    agent = AgentClient(LocalTransport(env=env), python=sys.executable)
    for unit in agent.units():  # never leave an engine behind, also when the test failed
        agent.stop(unit.id, grace=2)


def denv(env: dict[str, str], repo: GitRepo, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "reconciler", *args, "--repo", str(repo.path)]
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=480)


def ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def test_finds_verifies_rejects_fp8_and_opens_a_pr(lab: tuple[GitRepo, dict[str, str]]) -> None:
    repo, env = lab
    started = time.monotonic()
    out = ok(
        denv(env, repo, "optimize", "start", "chat-8b/canary", "--goal", "throughput",
             "--budget-gpus", "2", "--levers", "max_batch,kv_dtype", "--requests", "24",
             "--run-seconds", "1s", "--seed", "1", "--auto", "--ready-timeout", "60s", "--json")
    )  # fmt: skip
    state: dict[str, Any] = json.loads(out)
    assert state["state"] == "finished" and state["trials"] <= 3
    assert state["traffic"] == "releases/chat-8b/traffic/canary.jsonl"
    assert state["target"] == "ttft:p99<1.5s"
    current = sum(r["goal"] for r in state["current"]["runs"]) / len(state["current"]["runs"])
    rows = {r["id"]: r for r in state["candidates"]}
    print(f"optimize start: {time.monotonic() - started:.1f}s, {state['trials']} trials, "
          f"{len(rows)} candidates")  # fmt: skip
    for r in [state["current"], *rows.values()]:
        figures = [(run["goal"], run["rate"]) for run in r["runs"]]
        print(f"  {r['id']} {r['change']}: {r['status']} {figures} {r.get('reason') or ''}")

    verified = [r for r in rows.values() if r["status"] == "verified"]
    assert verified, json.dumps(state["candidates"], indent=1)[:4000]
    # --auto promotes each verified candidate better than the last one promoted: the pull
    # request ends with the best of them
    winner = max(verified, key=lambda r: sum(run["goal"] for run in r["runs"]) / len(r["runs"]))
    assert "fp8" not in winner["change"] and winner["parity_passed"] is True
    assert winner["gain"]["low"] > 0 and winner["gain"]["gain"] > 0.03
    # a real gain: more of the same traffic per GPU, every request meeting the target there
    (baseline, *_), (first, *_) = state["current"]["runs"], winner["runs"]
    assert baseline["miss"] is None and first["miss"] is None
    assert first["rate"] > baseline["rate"] * 1.03 and winner["gpus"] == 1
    assert first["tried"] and any(p["miss"] for p in first["tried"])  # it found an edge
    assert winner["pr"] == 1

    fp8 = [r for r in rows.values() if "fp8" in r["change"] and r["runs"]]
    assert fp8, "no fp8 KV candidate was trialed"
    tried = fp8[0]
    faster = sum(r["goal"] for r in tried["runs"]) / len(tried["runs"])
    assert faster > current * 1.03 and tried["status"] == "rejected" and tried["pr"] is None
    if tried["parity_passed"] is False:  # it beat the winner too: parity alone rejected it
        assert tried["reason"].startswith("parity: ") and "prompts differ" in tried["reason"]
        # fp8 candidates after it are rejected without a trial: no GPU time, no trial counted
        reused = f"parity: fails as {tried['id']}"
        shared = [r for r in rows.values() if (r["reason"] or "").startswith(reused)]
        assert all(not r["runs"] and r["parity_passed"] is False for r in shared)
    else:  # at capacity an fp8 KV cache is no faster than the best verified when it was
        # judged (the winner, or one verified before it; tests/optimize/test_verify_loop.py
        # has the parity path): never verified, so never parity-checked
        judged = [f"not better than verified {r['id']}" for r in verified]
        assert any(tried["reason"].startswith(text) for text in judged), tried["reason"]
    assert sum(1 for r in rows.values() if r["runs"]) == state["trials"]

    table = ok(denv(env, repo, "optimize", "candidates", "chat-8b/canary"))
    print(table)
    for header in ("CANDIDATE", "CHANGE", "GOODPUT/GPU", "RATE", "TTFT-P99", "PARITY", "STATUS"):
        assert header in table
    assert "verified (PR #1)" in table
    refused = denv(env, repo, "optimize", "promote", tried["id"])
    assert refused.returncode == 1
    assert "never ships" in refused.stderr or "only verified candidates ship" in refused.stderr

    # the PR edits the release in place, comment kept, and the merge deploys it
    diff = subprocess.run(
        ["git", "-C", str(repo.path), "diff", "main", "optimize/chat-8b-canary"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    wanted = winner["overrides"]["settings"]["max_batch"]
    assert f"+    settings: {{ max_batch: {wanted} }}       # far too small" in diff
    assert diff.count("\n+") == 1 + diff.count("\n+++")  # one line changed
    forge = LocalForge(repo.path, user="grace")
    assert "Optimizer candidate for `chat-8b` on `canary`" in forge.pull_request(1).body
    kinds = [c.body.split(" -->")[0] for c in forge.comments(1)]
    assert kinds == ["<!-- denv:candidate", "<!-- denv:plan"]
    forge.approve(1)
    merged = forge.merge(1)
    assert merged.status == "merged" and merged.sha
    flows_through_the_stages(repo, env, merged.sha, wanted)


def flows_through_the_stages(repo: GitRepo, env: dict[str, str], merged: str, batch: int) -> None:
    """The bot deploys the merged revision to the canary, bakes it, merges the promotion PR
    into prod (`promotion: auto`) and deploys it there: prod's pin names the merge."""
    log = repo.path.parent / "bot.log"
    argv = [sys.executable, "-m", "reconciler", "reconcile", "--repo", str(repo.path),
            "--interval", "0.5s", "--ready-timeout", "60s", "--drain", "1s"]  # fmt: skip
    agent = AgentClient(LocalTransport(env=env), python=sys.executable)

    def prod_pin() -> str | None:
        """Prod's pin on main, read in this process (the agent's answers cost a process)."""
        tree = repo.git.references["refs/heads/main"].peel(pygit2.Commit).tree
        path = "releases/chat-8b/promotions.yaml"
        if path not in tree:
            return None
        blob = repo.git[tree[path].id]
        assert isinstance(blob, pygit2.Blob)
        pins = yaml.safe_load(blob.data) or {}
        found: str | None = (pins.get("promotions") or {}).get("prod", {}).get("revision")
        return found

    def batches(stage: str) -> set[int]:
        """max_batch of each engine of the stage running the merged revision."""
        engines = [u for u in agent.units() if u.id.startswith(f"chat-8b.{stage}.") and u.alive]
        return {
            json.loads(u.argv[u.argv.index("--spec-json") + 1])["recipe"]["settings"]["max_batch"]
            for u in engines
            if "--spec-json" in u.argv and u.labels.get("revision") == merged
        }

    started = time.monotonic()
    with log.open("wb") as out:
        bot = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)
    try:

        def alive() -> None:
            assert bot.poll() is None, log.read_text()[-3000:]

        # the canary bakes the merge before prod's pin can move to it
        wait_for(lambda: alive() or prod_pin() == merged, timeout=120, what="prod's pin")
        wait_for(lambda: alive() or batches("prod") == {batch}, timeout=90, what="prod at it")
        assert batches("canary") == {batch}
        print(f"merge to prod: {time.monotonic() - started:.1f}s")
    finally:
        stop_process(bot, grace=60)
    promotions = [p for p in LocalForge(repo.path).pull_requests(PrState.MERGED)
                  if p.head_branch.startswith("denv/promote/")]  # fmt: skip
    assert [p.author for p in promotions] == ["denv-bot"], log.read_text()[-3000:]
    assert all(not u.id.startswith("trial-") for u in agent.units() if u.alive)


def test_stop_ends_a_running_study_and_its_trial(lab: tuple[GitRepo, dict[str, str]]) -> None:
    repo, env = lab
    log = repo.path.parent / "optimize.log"
    argv = [sys.executable, "-m", "reconciler", "optimize", "start", "chat-8b/canary",
            "--budget-gpus", "2", "--levers", "max_batch", "--seed", "1", "--json",
            "--ready-timeout", "60s", "--repo", str(repo.path)]  # fmt: skip
    with log.open("wb") as out:
        running = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)
    agent = AgentClient(LocalTransport(env=env), python=sys.executable)
    try:

        def deployed() -> bool:  # the current release on trial GPUs: the run is under way
            assert running.poll() is None, log.read_text()[-3000:]
            return any(u.alive and u.labels.get("trial") for u in agent.units())

        wait_for(deployed, timeout=120, what="the current release's trial deployment")
        stopped = json.loads(ok(denv(env, repo, "optimize", "stop", "chat-8b/canary", "--json")))
        assert stopped == {"target": "chat-8b/canary", "pid": running.pid, "stopped": True}
        assert running.wait(timeout=60) == 0, log.read_text()[-3000:]
    finally:
        running.kill()
    assert not [u.id for u in agent.units() if u.alive]  # every trial torn down
    state = json.loads(ok(denv(env, repo, "optimize", "candidates", "chat-8b/canary", "--json")))
    assert (state["state"], state["note"]) == ("stopped", "stopped by `denv optimize stop`")
    assert all(r["status"] != "trialing" for r in state["candidates"])
