"""Trials abandoned by a killed process, end to end on a local fleet of simulated GPUs: a
`denv bench run` killed with SIGKILL leaves its trial running; `denv fleet trials` names it
abandoned, the next bench run on the fleet reclaims its GPU (the fleet has one trial GPU),
and `--stop-abandoned` frees another's. A release's unit is never touched."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from reconciler.fleet.hostagent import AgentClient
from reconciler.fleet.model.observed import UnitRecord
from reconciler.fleet.transport import LocalTransport
from tests.fleet.conftest import wait_for
from tests.reconcile.conftest import GitRepo, git_repo

__all__ = ["git_repo"]

RECIPE = "llama-3.1-8b/vllm@1"


def fleet_file() -> str:
    """4 simulated H200 on a loopback address of its own; only GPU 3 is for trials."""
    address = f"127.{random.randint(1, 254)}.{random.randint(0, 255)}.{random.randint(1, 254)}"
    return (
        "fleet:\n  name: lab\n  provider: local\n  hardware: h200\n  simulated: true\n"
        f"  transport: local\n  hosts:\n    - {{ name: localhost, address: {address}, gpus: 4 }}\n"
        "  trial_gpus: 1\n"
    )


@dataclass
class Lab:
    repo: GitRepo
    folder: Path
    env: dict[str, str]

    def argv(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "reconciler", *args, "--repo", str(self.repo.path)]

    def denv(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.argv(*args), capture_output=True, text=True, env=self.env, timeout=240
        )

    def bench_run(self, requests: int, output: int) -> list[str]:
        trace = self.folder / f"trace-{requests}-{output}.jsonl"
        line = {"timestamp": 0, "input_length": 600, "output_length": output, "hash_ids": [1, 2]}
        trace.write_text("\n".join(json.dumps(line) for _ in range(requests)) + "\n")
        return self.argv(
            "bench", "run", "--recipe", RECIPE, "--target", "lab", "--traffic", str(trace),
            "--concurrency", "1", "--ready-timeout", "60s",
        )  # fmt: skip

    def agent(self) -> AgentClient:
        return AgentClient(LocalTransport(env=self.env), python=sys.executable)

    def trials(self) -> dict[str, Any]:
        done = self.denv("fleet", "trials", "lab", "--json")
        assert done.returncode == 0, done.stdout + done.stderr
        found: dict[str, Any] = json.loads(done.stdout)
        return found

    def killed_trial(self) -> tuple[int, str]:
        """A long bench run, SIGKILLed once its trial's router runs: its pid and trial id."""
        log = self.folder / "killed.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                self.bench_run(400, 4000), stdout=out, stderr=subprocess.STDOUT, env=self.env
            )
        try:
            wait_for(
                lambda: process.poll() is not None or router_up(self),
                timeout=90,
                what="the trial's router",
            )
            assert process.poll() is None, log.read_text()
        finally:
            process.send_signal(signal.SIGKILL)
            process.wait(timeout=30)
        [trial] = {u.labels["trial"] for u in self.agent().units() if u.id.startswith("trial-")}
        return process.pid, trial


def router_up(lab: Lab) -> bool:
    return any(u.id.endswith(".router") and u.alive for u in trial_units(lab))


def trial_units(lab: Lab) -> list[UnitRecord]:
    return [u for u in lab.agent().units() if u.id.startswith("trial-")]


@pytest.fixture
def lab(git_repo: GitRepo, tmp_path: Path) -> Iterator[Lab]:
    git_repo.write("fleets/lab.yaml", fleet_file())
    git_repo.commit("a lab fleet with one trial GPU")
    env = {**os.environ, "DENV_HOME": str(tmp_path / "home"), "DENV_CACHE": str(tmp_path / "c")}
    env.pop("DENV_REPO", None)
    found = Lab(git_repo, tmp_path / "lab", env)
    found.folder.mkdir()
    yield found
    agent = found.agent()
    for unit in agent.units():  # never leave an engine behind, also when the test failed
        agent.stop(unit.id, grace=1)


def test_a_killed_bench_runs_trial_is_reported_reclaimed_and_stopped(lab: Lab) -> None:
    # A release's unit whose labels name a dead owner too: never a trial's to reclaim.
    release = lab.agent().launch(
        {
            "id": "chat.canary.lab.aggregated-0",
            "digest": "d",
            "argv": [sys.executable, "-c", "import signal; signal.pause()"],
            "gpus": [0],
            "labels": {"release": "chat", "stage": "canary", "fleet": "lab", "trial": "x",
                       "owner": "nowhere/1/1"},
        }
    )  # fmt: skip
    pid, first = lab.killed_trial()

    found = lab.trials()
    [row] = found["trials"]
    assert (row["trial"], row["state"], row["purpose"]) == (first, "abandoned", "bench")
    assert row["owner"].split("/")[1] == str(pid)
    assert row["recipe"] == RECIPE and row["gpus"] == {"localhost": [3]}
    unknown = lab.denv("fleet", "trials", "lab", "--stop", "nope")
    assert unknown.returncode == 1 and "no trial nope on lab" in unknown.stderr, unknown.stderr

    # The next trial needs the fleet's one trial GPU: it reclaims it first, and runs.
    done = subprocess.run(
        lab.bench_run(3, 8), capture_output=True, text=True, env=lab.env, timeout=240
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"- reclaimed abandoned trial {first} (bench;" in done.stderr, done.stderr
    assert "GPUs freed: localhost:3" in done.stderr
    assert trial_units(lab) == []

    # Killed again: this time stopped by command.
    _, second = lab.killed_trial()
    stopped = lab.denv("fleet", "trials", "lab", "--stop-abandoned", "--json")
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    assert json.loads(stopped.stdout)["stopped"] == [second]
    assert trial_units(lab) == []
    [kept] = [u for u in lab.agent().units() if u.id == release.id]
    assert kept.alive and kept.pid == release.pid
