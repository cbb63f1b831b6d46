"""An invalid file merged on the default branch holds only what reads it: the bot, one
`denv reconcile --once` pass at a time on a local fleet of simulated GPUs, names the file
(path:line:col and field) and goes on with every deployment that does not depend on it — a
crashed engine elsewhere is restarted, what the broken file decides is left as it runs."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from reconciler.fleet.model.observed import UnitRecord
from tests.fleet.conftest import wait_for
from tests.labs.elastic_local import FLEET, ElasticLab, elastic_lab
from tests.labs.release import release_yaml, stage
from tests.reconcile.conftest import GitRepo
from tests.reconcile.test_loop import Bot


@pytest.fixture
def lab(git_repo: GitRepo, tmp_path: Path) -> Iterator[ElasticLab]:
    yield from elastic_lab(git_repo, tmp_path)


def deploy(lab: ElasticLab, *releases: str) -> None:
    """Each release one replica of one GPU on the lab; the bot's first pass starts them."""
    for name in releases:
        lab.repo.write(f"releases/{name}/denv.yaml", release_yaml(stage("canary", FLEET)))
    lab.repo.commit("releases on the lab")
    lab.reconcile()


def engine_of(lab: ElasticLab, release: str) -> UnitRecord:
    [found] = [
        u
        for u in lab.units()
        if u.labels.get("release") == release and u.labels.get("role") == "aggregated"
    ]
    return found


def crash(lab: ElasticLab, release: str) -> UnitRecord:
    """SIGKILL the release's engine; its record once the agent has seen it exit."""
    engine = engine_of(lab, release)
    assert engine.alive and engine.pid is not None
    os.kill(engine.pid, signal.SIGKILL)
    wait_for(lambda: not engine_of(lab, release).alive, timeout=60, what="the engine's exit")
    return engine


def test_garbled_results_file_does_not_stop_a_restart(lab: ElasticLab) -> None:
    deploy(lab, "chat-8b")
    crashed = crash(lab, "chat-8b")
    lab.repo.write("results/2026-12/garbled.jsonl", '{"id": "r1", "recipe": {\n')
    lab.repo.commit("a garbled result")
    done = lab.reconcile(ok=False)
    assert done.returncode == 1, done.stdout + done.stderr  # the pass had an error
    again = engine_of(lab, "chat-8b")
    assert again.alive and again.restarts == crashed.restarts + 1, done.stdout + done.stderr
    assert "results/2026-12/garbled.jsonl:1:" in done.stdout, done.stdout
    shown = lab.status()
    [line] = shown["invalid_files"]
    assert line.startswith("results/2026-12/garbled.jsonl:1:"), line
    assert any("garbled.jsonl" in e for e in shown["bot"][FLEET]["errors"])
    planned = lab.denv("plan")  # nothing left to do, and the file named
    assert planned.returncode == 1, planned.stdout + planned.stderr
    assert "invalid file: results/2026-12/garbled.jsonl:1:" in planned.stdout, planned.stdout


def test_broken_release_holds_only_that_release(lab: ElasticLab) -> None:
    deploy(lab, "chat-8b", "chat-b")
    held = {u.id: u.pid for u in lab.units() if u.labels.get("release") == "chat-b"}
    assert len(held) == 2  # its engine and its router
    crashed = crash(lab, "chat-8b")
    lab.repo.replace("releases/chat-b/denv.yaml", "  recipe:", "  recipie:")
    lab.repo.commit("chat-b: a misspelt field")
    done = lab.reconcile(ok=False)
    assert done.returncode == 1, done.stdout + done.stderr
    again = engine_of(lab, "chat-8b")
    assert again.alive and again.restarts == crashed.restarts + 1, done.stdout + done.stderr
    assert "releases/chat-b/denv.yaml:4:12: release.recipie: unknown field" in done.stdout, (
        done.stdout
    )
    after = {u.id: u.pid for u in lab.units() if u.alive and u.labels.get("release") == "chat-b"}
    assert after == held  # left as it runs: not stopped as a removed release would be
    [row] = [d for d in lab.status()["deployments"] if d["release"] == "chat-b"]
    assert "releases/chat-b/denv.yaml:" in row["error"], row
    assert row["state"] == "held: invalid file", row


def test_a_fleet_file_broken_under_a_running_bot(lab: ElasticLab) -> None:
    """The bot held the fleet's lease when its file broke: the fleet is held, what runs there
    left as it runs, and the bot still stops cleanly (the lease expires by itself)."""
    deploy(lab, "chat-8b")
    running = {u.id: u.pid for u in lab.units() if u.alive}
    bot = Bot(lab.repo, lab.cache / "home", "--interval", "1s", env=lab.env)
    try:
        bot.expect("=2;")  # the engine and the router, kept
        lab.repo.replace(f"fleets/{FLEET}.yaml", "simulated: true", "simulated: maybe")
        lab.repo.commit("the lab's fleet file broken")
        line = bot.expect(f"fleets/{FLEET}.yaml:")
        assert f"holds fleet {FLEET}" in line, line
        assert bot.terminate() == 0, (lab.cache / "bot.stderr").read_text()
    finally:
        bot.close()
    assert {u.id: u.pid for u in lab.units() if u.alive} == running
