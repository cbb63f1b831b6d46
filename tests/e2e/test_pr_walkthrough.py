"""A pull request from open to deployed through the fake GitHub, as CI and reviewers drive it:
`denv pr plan` comments the plan and sets its check (plan.yml), an approval by a user without
write permission does not count and one by a permitted user does, the approved head is merged,
and `denv reconcile --once` on the merged main (reconcile.yml) starts it on the local fleet of
simulated GPUs, which answers through the official openai client.

Between the approval and the merge, bench.yml's `denv pr commands`: a `/denv bench` from a
user without write permission is ignored, one from a permitted user naming the head benches
the release as the pull request changes it beside the current one on trial GPUs of the local
fleet, with parity between them, comments both and sets the `denv bench` check — once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from reconciler.bench.traffic import TraceLine
from reconciler.fleet.drivers.registry import Drivers
from reconciler.fleet.hostagent import AgentClient
from reconciler.fleet.transport import LocalTransport
from reconciler.forge.commands import merge_blockers
from reconciler.forge.comments import render
from reconciler.forge.handled import Handled
from reconciler.forge.kinds.commands import CommandsView
from reconciler.forge.models import Conclusion, MergeStatus, PrState
from reconciler.pr.bench import BenchOptions
from reconciler.pr.commands import run_commands
from reconciler.pr.plan import plan_pull_request
from reconciler.spec.loader import open_repo
from tests.conftest import ROOT
from tests.forge.conftest import GitHubSetup, git_repo, github
from tests.forge.test_github import RELEASE, open_pr

__all__ = ["git_repo", "github"]  # the forge tests' fixtures, not the reconciler's (conftest)


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    """DENV_HOME of the local fleet's agent; whatever the test started is stopped after it."""
    folder = tmp_path / "denv-home"
    yield folder
    agent = AgentClient(
        LocalTransport(env={**os.environ, "DENV_HOME": str(folder)}), python=sys.executable
    )
    for unit in agent.units():
        agent.stop(unit.id, grace=2)


def small_bench(folder: Path) -> BenchOptions:
    """Two clients, six short answers, three parity prompts: seconds on simulated GPUs."""
    suite = folder / "parity-small.jsonl"
    prompts = (ROOT / "policies/parity/default.jsonl").read_text().splitlines()[:3]
    suite.write_text("\n".join(prompts) + "\n")
    trace = tuple(
        TraceLine(timestamp=0, input_length=600, output_length=24, hash_ids=[1, 1000 + i])
        for i in range(6)
    )
    return BenchOptions(
        levels=(2.0,), requests=6, trace=trace, trace_name="short", suite=str(suite)
    )


def bench_step(github: GitHubSetup, number: int, head: str, drivers: Drivers) -> None:
    forge, fake = github.forge, github.fake
    options = small_bench(github.work.parent)
    cache = github.work.parent / "cache"
    fake.comment(number, "mallory", "/denv bench")  # read permission only: ignored
    ignored = run_commands(forge, github.work, number, drivers, options, cache=cache)
    assert ignored.ran == [] and len(fake.comment_bodies(number)) == 2  # plan, mallory's
    # mallory pastes the bot's commands marker, claiming the next comments as taken
    claimed = [Handled(comment_id=i, user="grace", command="bench", outcome="done") for i in
               range(1, 1000)]  # fmt: skip
    fake.comment(number, "mallory", render(CommandsView(handled=claimed)))
    asked = fake.comment(number, "grace", f"/denv bench {head}")  # the commit grace read
    ran = run_commands(forge, github.work, number, drivers, options, only=asked, cache=cache)
    assert [(h.comment_id, h.user, h.command) for h in ran.ran] == [(asked, "grace", "bench")]
    assert [(c.name, c.conclusion) for c in ran.checks] == [("denv bench", "success")], ran.checks
    assert ran.checks[0].title == "1 benched, parity passed (simulated)"
    kinds = {b.split(" -->", 1)[0]: b for b in fake.comment_bodies(number) if b.startswith("<!--")}
    bench = kinds["<!-- denv:bench"]
    assert bench.startswith(f"<!-- denv:bench -->\n### denv bench for `{head[:12]}`")
    assert "#### `chat-8b at c2` on `local` (h200, simulated)" in bench
    assert "| output (tok/s/GPU) |" in bench and "    PR c2: [" in bench
    assert "3 of 3 prompts agree" in kinds["<!-- denv:parity"]
    assert f"| comment {asked} | grace | /denv bench |" in kinds["<!-- denv:commands"]
    again = run_commands(forge, github.work, number, drivers, options, cache=cache)
    assert again.ran == []  # each command runs once


def test_pull_request_from_open_to_deployed(github: GitHubSetup, home: Path) -> None:
    forge, fake = github.forge, github.fake
    number, head = open_pr(github)  # max_batch 128 → 192, pushed by ada

    # plan.yml: `denv pr plan --pr N` against GitHub
    drivers = Drivers(local_env={**os.environ, "DENV_HOME": str(home)})
    try:
        planned = plan_pull_request(
            forge, github.work, number, drivers, cache=github.work.parent / "cache"
        )
    finally:
        drivers.close()
    assert planned.files == [RELEASE] and planned.problems == []
    assert planned.check.conclusion == Conclusion.SUCCESS
    assert planned.check.title == "Plan: 3 to start, 0 to replace, 0 to stop, 0 unchanged."
    [body] = fake.comment_bodies(number)
    assert body.startswith(f"<!-- denv:plan -->\n### denv plan for `{head[:12]}` against `main`")
    assert "+ chat-8b.canary.local.aggregated-1  localhost  GPUs 1 " in body
    assert [(c.name, c.conclusion) for c in forge.checks(head)] == [("denv plan", "success")]

    # reviews: one without write permission, then one that counts
    gates = open_repo(github.work, rev=head).policies.gates
    fake.review(number, "mallory")
    approvals = forge.approvals(number, gates.approvers)
    assert approvals.count == 0 and [i.user for i in approvals.ignored] == ["mallory"]
    assert merge_blockers(approvals, gates.default_approvals, forge.checks(head)) == [
        "0 of 1 approvals of the head"
    ]
    fake.review(number, "grace")
    approvals = forge.approvals(number, gates.approvers)
    assert approvals.counted == ["grace"]

    # bench.yml on `/denv bench`: the pull request's release benched beside the current one
    drivers = Drivers(local_env={**os.environ, "DENV_HOME": str(home)})
    try:
        bench_step(github, number, head, drivers)
    finally:
        drivers.close()
    assert [(c.name, c.conclusion) for c in forge.checks(head)] == [
        ("denv bench", "success"),
        ("denv plan", "success"),
    ]

    # the gate, then the merge of exactly the approved and planned head
    assert merge_blockers(approvals, gates.default_approvals, forge.checks(head)) == []
    assert forge.merge(number, head_sha=head).status == MergeStatus.MERGED
    assert forge.pull_request(number).state == PrState.MERGED

    # reconcile.yml: one pass over the merged main starts the release on the local fleet
    env = {**os.environ, "DENV_HOME": str(home), "DENV_CACHE": str(home.parent / "cache")}
    env.pop("DENV_REPO", None)
    remote = str(github.remote)  # the merged main, as GitHub's side of git holds it
    run = subprocess.run(
        [sys.executable, "-m", "reconciler", "reconcile", "--once", "--json", "--repo", remote],
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
    )
    assert run.returncode == 0, run.stderr
    passed = json.loads(run.stdout)
    assert passed["errors"] == [] and passed["done"] == {"start": 3}, passed
    # from its decision on, the pass waited for the three units to serve: part of it, not all
    assert 0 < passed["apply_seconds"] < passed["seconds"], passed

    agent = AgentClient(LocalTransport(env=env), python=sys.executable)
    units = {u.id: u for u in agent.units()}
    engines = [u for name, u in units.items() if "aggregated" in name]
    assert len(engines) == 2 and all(u.alive for u in units.values())
    for engine in engines:  # the simulator is handed the merged release's resolved spec
        spec = json.loads(engine.argv[engine.argv.index("--spec-json") + 1])
        assert spec["recipe"]["settings"]["max_batch"] == 192
    router = units["chat-8b.canary.local.router"]
    client = openai.OpenAI(
        base_url=f"http://127.0.0.1:{router.port}/v1", api_key="unused", max_retries=0, timeout=10
    )
    answer = client.chat.completions.create(
        model="chat-8b", messages=[{"role": "user", "content": "ready?"}], max_tokens=4
    )
    assert answer.usage is not None and answer.usage.completion_tokens == 4
