"""The rollout bot pass by pass over simulator engines (`denv sim serve` on loopback), with a
real git repository and the local forge; the test is its clock, and hands it the snapshot a
reconcile pass would (deployments whose units are the simulators, a plan that keeps them).

- Deploy-time parity's prompts are denv's own traffic: they never count in a stage's alarms,
  so they can neither fill nor dilute the window (the bake starts after parity finished).
- A rollback on the canary rejects the revision there and for promotions only: prod, at the
  same revision, keeps running it and says so; the revision is never promoted further.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from reconciler.engines.units import Metrics, Probe, Unit
from reconciler.forge.local import LocalForge
from reconciler.parity.deploytime import deploy_time_parity
from reconciler.reconcile.desired import Desired, DesiredDeployment, DesiredUnit
from reconciler.reconcile.plan import Plan
from reconciler.reconcile.snapshot import Snapshot
from reconciler.rollout.bot import RolloutBot
from reconciler.rollout.revisions import Revisions, adjust_stages
from reconciler.rollout.state import RolloutState
from reconciler.rollout.status import rollout_status
from reconciler.spec.loader import open_repo
from tests.engines.sim.sims import Sim, http_post, sim_process, sim_spec
from tests.labs.release import release_yaml
from tests.reconcile.conftest import GitRepo, git_repo

__all__ = ["git_repo"]  # the fixture

HEAD = release_yaml("", batch="BATCH")  # the stages follow
MIXED = (
    HEAD
    + """\
  - name: canary
    fleets: [local, local2]
    recipes: { local2: llama-3.1-8b/sglang@1 }
    bake: 1h
    alarms: [errors-10pct]
"""
)
THREE = (
    HEAD
    + """\
  - name: canary
    fleets: [local]
    bake: 1h
    alarms: [errors-10pct]
  - name: prod
    fleets: [local]
    bake: 1h
    alarms: [errors-10pct]
  - name: global
    fleets: [local]
    bake: 1h
"""
)
ALARMS = "alarms:\n  errors-10pct: { metric: error_rate, max: 10%, window: 5m, min_requests: 3 }\n"
SUITE = 64  # parity prompts kept: 128 requests of denv's own, against 3 of the users'
T0 = 1.75e9  # the bot's clock (Unix seconds), moved by the test


@pytest.fixture
def sims(tmp_path: Path) -> Iterator[list[Sim]]:
    spec = sim_spec("llama-3.1-8b/vllm@1", time_scale=1000.0)
    with sim_process(spec, tmp_path) as one, sim_process(spec, tmp_path) as two:
        yield [one, two]


def setup(repo: GitRepo, release: str) -> None:
    fleet = (repo.path / "fleets/local.yaml").read_text()
    repo.write("fleets/local2.yaml", fleet.replace("name: local", "name: local2"))
    repo.write("policies/alarms.yaml", ALARMS)
    suite = (repo.path / "policies/parity/default.jsonl").read_text().splitlines()
    repo.write("policies/parity/default.jsonl", "\n".join(suite[:SUITE]) + "\n")
    repo.write("releases/chat-8b/denv.yaml", release.replace("BATCH", "128"))
    repo.commit("the release")


def deployment(stage: str, fleet: str, revision: str, recipe: str, sim: Sim) -> DesiredDeployment:
    port = int(sim.url.rsplit(":", 1)[1])
    unit = Unit(
        name="aggregated-0", role="aggregated", replica=0, node=0, engine="sim",
        host="localhost", address="127.0.0.1", argv=[], env={}, port=port, gpus=1,
        gpu_indices=[0], readiness=Probe(path="/health"), metrics=Metrics(port=port),
    )  # fmt: skip
    hosted = DesiredUnit(
        id=f"{stage}-{fleet}", host="localhost", labels={}, unit=unit, fleet=fleet,
        digest="d", replica_gpus=1,
    )  # fmt: skip
    return DesiredDeployment(
        release="chat-8b", stage=stage, fleet=fleet, revision=revision, recipe=recipe,
        gpus=1, endpoint=sim.url, units=(hosted,),
    )  # fmt: skip


def snap_of(repo: GitRepo, deployments: list[DesiredDeployment]) -> tuple[Snapshot, Revisions]:
    source = repo.source()
    source.sync()
    head = source.resolve()
    desired = Desired(head=head, deployments=tuple(deployments))
    return Snapshot(head, source.repo_at(head), desired, {}, Plan(head=head)), Revisions(source)


def ask(sim: Sim, count: int) -> int:
    """`count` chat requests, as users send them; how many failed."""
    client = openai.OpenAI(base_url=f"{sim.url}/v1", api_key="-", max_retries=0, timeout=30)
    failed = 0
    for _ in range(count):
        try:
            client.chat.completions.create(
                model="llama-3.1-8b", messages=[{"role": "user", "content": "hi"}], max_tokens=2
            )
        except openai.APIStatusError:
            failed += 1
    return failed


def fault(sim: Sim, **faults: Any) -> None:
    status, _ = http_post(f"{sim.url}/admin/faults", faults)
    assert status == 200


def test_deploy_time_parity_is_never_counted_in_the_alarms(
    git_repo: GitRepo, sims: list[Sim]
) -> None:
    setup(git_repo, MIXED)
    snap, revisions = snap_of(git_repo, [])
    revision = revisions.of_stage(snap.head, "chat-8b", 0, None)
    assert revision is not None
    on = [
        deployment("canary", "local", revision, "llama-3.1-8b/vllm@1", sims[0]),
        deployment("canary", "local2", revision, "llama-3.1-8b/sglang@1", sims[1]),
    ]
    snap, revisions = snap_of(git_repo, on)
    clock = [T0]
    bot = RolloutBot(revisions, lambda: LocalForge(git_repo.path), clock=lambda: clock[0])
    # Both fleets answer ready to the bot while parity, a moment earlier in the same pass,
    # still saw one warming up: parity says waiting.
    kept = bot.check(snap, {}, {"chat-8b/canary": {"state": "waiting"}})
    parity = deploy_time_parity(git_repo.source())(snap, {})
    assert parity["chat-8b/canary"]["verdict"] == f"PARITY {SUITE}/{SUITE}"
    clock[0] += 5
    kept = bot.check(snap, kept, parity)  # parity done: the bake starts here
    assert kept["stages"]["chat-8b/canary"]["phase"] == "baking"
    for sim in sims:
        fault(sim, error_rate=1.0)
    failed = ask(sims[0], 3) + ask(sims[1], 1)
    clock[0] += 5
    kept = bot.check(snap, kept, parity)
    [reading] = kept["stages"]["chat-8b/canary"]["alarms"]
    # 4 requests, all failed: 2 x 64 quick parity answers before them would have read 3%.
    assert (failed, reading["requests"]) == (4, 4), reading
    assert reading["firing"] and reading["value"] == 1.0, reading


def test_a_canary_rollback_leaves_prod_on_the_same_revision(
    git_repo: GitRepo, sims: list[Sim]
) -> None:
    setup(git_repo, THREE)
    good = str(git_repo.git.head.target)
    git_repo.write("releases/chat-8b/denv.yaml", THREE.replace("BATCH", "64"))
    bad = git_repo.commit("max_batch 64")
    git_repo.pin("chat-8b", "prod", bad)
    git_repo.commit("promote max_batch 64 to prod")
    forge = LocalForge(git_repo.path)
    clock = [T0]

    def bot_pass(kept: dict[str, Any]) -> tuple[dict[str, Any], list[tuple[str, str]]]:
        """One pass, on the deployments the reconciler runs with the bot's overrides."""
        snap, revisions = snap_of(git_repo, [])
        runs = adjust_stages(revisions, revisions.source.stages(snap.head), {"rollout": kept})
        found = {(s.stage, s.revision) for s in runs.running}
        wanted = [("canary", sims[0]), ("prod", sims[1])]
        on = [
            deployment(stage, "local", revision, "llama-3.1-8b/vllm@1", sim)
            for stage, sim in wanted
            for name, revision in found
            if name == stage
        ]
        snap, revisions = snap_of(git_repo, on)
        bot = RolloutBot(revisions, lambda: forge, clock=lambda: clock[0])
        return bot.check(snap, kept, {}), sorted(found)

    kept, running = bot_pass({})
    assert running[1] == ("prod", bad)  # the canary: the head, whose release revision is `bad`
    fault(sims[0], error_rate=1.0)
    assert ask(sims[0], 3) == 3 and ask(sims[1], 3) == 0
    clock[0] += 5
    kept, running = bot_pass(kept)
    canary, prod = kept["stages"]["chat-8b/canary"], kept["stages"]["chat-8b/prod"]
    assert (canary["phase"], canary["override"]) == ("rolled back", good)
    assert (prod["phase"], prod["revision"]) == ("baking", bad)
    assert kept["rejected_on"] == {bad: ["canary"]}

    # The rollback PR records the rejection for the canary and says what it did to each stage.
    [pr] = [p for p in forge.pull_requests() if p.head_branch.startswith("denv/rollback/")]
    assert f"- `canary`: rolled back from {bad[:12]} to {good[:12]}" in pr.body
    assert f"- `prod`: keeps running {bad[:12]}: rolled back only if its own alarms fire" in pr.body
    assert f"- `global`: runs nothing yet; {bad[:12]} is never promoted to it" in pr.body
    [rejection] = open_repo(git_repo.path, pr.head_branch).promotions["chat-8b"].rejected
    assert (rejection.revision, rejection.stage) == (bad, "canary")

    # The next passes run the canary at the last good revision and prod at the rejected one;
    # prod's bake ends green there, and nothing promotes it to global.
    kept, running = bot_pass(kept)
    assert running == [("canary", good), ("prod", bad)]
    clock[0] += 3600
    kept, running = bot_pass(kept)
    assert running == [("canary", good), ("prod", bad)]
    assert kept["stages"]["chat-8b/prod"]["phase"] == "green"
    promotions = [p for p in forge.pull_requests() if p.head_branch.startswith("denv/promote/")]
    assert promotions == []

    snap, _ = snap_of(git_repo, [])
    rows = rollout_status(
        "chat-8b", snap.repo.releases["chat-8b"], snap.repo.promotions.get("chat-8b"),
        RolloutState.model_validate(kept), clock[0], bad,
    )  # fmt: skip
    shown = {r.stage: r for r in rows}
    assert (shown["canary"].running, shown["prod"].running) == (good, bad)
    assert shown["canary"].state.startswith(f"rolled back to {good[:12]}")
    assert shown["prod"].state == "green"
    assert re.match(rf"runs {bad[:12]}, rolled back on canary: kept here", shown["prod"].note)
