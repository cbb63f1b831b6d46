"""`denv bench run` end to end: a simulated GPU host behind a real sshd in a network
namespace, a release the reconciler serves there, and trials deployed beside it on the
fleet's trial GPUs — swept, ranked by `denv bench`, and torn down after success, an engine
that exits, an engine that crashes mid-level, Ctrl-C and SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from reconciler.bench.results import read_result
from reconciler.bench.traffic import read_trace, trace_digest
from reconciler.fleet.hostagent import AgentClient
from reconciler.fleet.model.observed import UnitRecord
from reconciler.fleet.ssh import SshTransport
from reconciler.spec.fleet import Host
from tests.fleet.conftest import wait_for
from tests.labs.sshd import SshLab, SshServer, ssh_lab, ssh_settings
from tests.reconcile.conftest import GitRepo, git_repo

__all__ = ["git_repo", "ssh_lab"]  # fixtures shared with the fleet and reconciler tests

RECIPE = "llama-3.1-8b/vllm@1"
RELEASE = """\
release:
  model: chat-8b
  weights: hf://meta-llama/Llama-3.1-8B-Instruct@0e9e39f249a16976918f6564b8830bc894c89659
  recipe: llama-3.1-8b/vllm@1
  topology: { mode: aggregated, replicas: 1, gpus: 1, parallel: { tp: 1 } }
stages:
  - name: canary
    fleets: [lab]
"""
# The engine's weights (16 GB) do not fit in 5 % of an H200: the simulator exits at start.
NO_ROOM = """\
recipe:
  id: llama-3.1-8b/no-room@1
  model: llama-3.1-8b
  engine: { name: vllm, version: 0.33.0 }
  hardware: [h200]
  topology: { mode: aggregated, replicas: 1, gpus: 1, parallel: { tp: 1 } }
  settings: { kv_cache: { memory_fraction: 0.05 } }
"""


def fleet_file(server: SshServer, lab: SshLab) -> str:
    """4 simulated H200: GPUs 0 and 1 for releases, 2 and 3 kept for trials."""
    return (
        "fleet:\n  name: lab\n  provider: test\n  hardware: h200\n  simulated: true\n"
        f"  python: {sys.executable}\n  transport: ssh\n"
        f"  ssh: {{ user: root, key_file: {lab.client_key}, known_hosts: {lab.known_hosts}, "
        "connect_timeout: 2 }\n"
        f"  hosts:\n    - {{ name: lab-h0, address: {server.address}, gpus: 4 }}\n"
        "  price: { gpu_hour: 3.80, note: lab rate }\n"
        "  trial_gpus: 2\n"
    )


@dataclass
class Lab:
    repo: GitRepo
    ssh: SshLab
    server: SshServer
    folder: Path

    def env(self) -> dict[str, str]:
        cache = self.folder / "cache"
        env = {**os.environ, "DENV_CACHE": str(cache), "DENV_HOME": str(cache / "home")}
        env.pop("DENV_REPO", None)
        return env

    def argv(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "reconciler", *args, "--repo", str(self.repo.path)]

    def denv(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.argv(*args), capture_output=True, text=True, env=self.env(), timeout=240
        )

    def bench_run(self, *args: str) -> list[str]:
        base = ["bench", "run", "--target", "lab", "--ready-timeout", "60s"]
        return self.argv(*base, *args)

    def start(self, argv: list[str]) -> tuple[subprocess.Popen[bytes], Path]:
        """A command in the background, its output in a file (a pipe nobody reads could
        fill up and stall it)."""
        log = self.folder / "background.log"
        with log.open("wb") as out:
            process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=self.env())
        return process, log

    def reconcile(self) -> str:
        done = self.denv("reconcile", "--once", "--ready-timeout", "60s", "--drain", "5s")
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    def agent(self) -> AgentClient:
        host = Host(name="lab-h0", address=self.server.address, gpus=4)
        return AgentClient(SshTransport(host, ssh_settings(self.ssh)), python=sys.executable)

    def units(self) -> list[UnitRecord]:
        return self.agent().units()

    def trace(self, requests: int, output: int = 24) -> Path:
        """Short answers by default, so a level takes a fraction of a second a request; long
        ones keep a run going for minutes, until the test interrupts it."""
        path = self.folder / f"trace-{requests}.jsonl"
        lines = (
            json.dumps(
                {
                    "timestamp": 0,
                    "input_length": 600,
                    "output_length": output,
                    "hash_ids": [1, 1000 + i],
                }
            )
            for i in range(requests)
        )
        path.write_text("\n".join(lines) + "\n")
        return path


@pytest.fixture
def lab(git_repo: GitRepo, ssh_lab: SshLab, tmp_path: Path) -> Iterator[Lab]:
    server = ssh_lab.start("lab", namespaced=True)
    git_repo.write("fleets/lab.yaml", fleet_file(server, ssh_lab))
    git_repo.write("releases/chat-8b/denv.yaml", RELEASE)
    git_repo.commit("chat-8b on the lab fleet")
    found = Lab(git_repo, ssh_lab, server, tmp_path / "lab")
    found.folder.mkdir()
    yield found
    try:  # never leave an engine behind, also when a test failed
        agent = found.agent()
        for unit in agent.units():
            agent.stop(unit.id, grace=1)
    except Exception:
        pass


def serving(lab: Lab) -> dict[str, tuple[int | None, tuple[int, ...]]]:
    """The release's units: id -> (pid, GPUs), alive ones only."""
    return {u.id: (u.pid, u.gpus) for u in lab.units() if u.alive and "release" in u.labels}


def trial_units(lab: Lab) -> list[UnitRecord]:
    return [u for u in lab.units() if u.id.startswith("trial-")]


def trial_up(lab: Lab) -> list[UnitRecord] | None:
    """The trial's units once its router answers ready (the sweep is about to start)."""
    units = trial_units(lab)
    router = next((u for u in units if u.id.endswith(".router") and u.alive), None)
    if router is None or router.port is None:
        return None
    try:
        url = f"http://{lab.server.address}:{router.port}/readiness"
        with urllib.request.urlopen(url, timeout=1) as answer:
            return units if answer.status == 200 else None
    except OSError:
        return None


def test_a_sweep_writes_results_that_bench_ranks_beside_an_untouched_release(lab: Lab) -> None:
    lab.reconcile()
    release = serving(lab)
    assert sorted(gpus for _, gpus in release.values()) == [(), (0,)]  # engine, router
    trace = lab.trace(8)
    done = subprocess.run(
        lab.bench_run(
            "--recipe",
            RECIPE,
            "--traffic",
            str(trace),
            "--concurrency",
            "1,2",
            "--requests",
            "6",
            "--json",
        ),
        capture_output=True,
        text=True,
        env=lab.env(),
        timeout=240,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    outcome: dict[str, Any] = json.loads(done.stdout)
    assert outcome["trial"]["hosts"] == {"lab-h0": [2]}  # a trial GPU, never 0 or 1
    assert [level["load"]["concurrency"] for level in outcome["levels"]] == [1, 2]
    assert Path(outcome["chart_png"]).read_bytes().startswith(b"\x89PNG")
    assert outcome["mermaid"].startswith("```mermaid\nxychart-beta")
    assert serving(lab) == release  # the same processes on the same GPUs
    assert trial_units(lab) == []
    results = [read_result(Path(path)) for path in outcome["results"]]
    assert [r.load.concurrency for r in results] == [1, 2]
    first = results[0]
    assert first.source.kind == "simulated"
    assert (first.engine.name, first.engine.version, first.gpus) == ("vllm", "0.33.0", 1)
    assert first.environment is not None
    assert first.environment.gpu_names == ["H200 SXM (simulated)"]
    assert first.workload.traffic_digest == trace_digest(read_trace(trace))
    assert first.recipe.digest and len(first.recipe.digest) == 64
    assert first.price is not None and first.price.source == "fleet lab: lab rate"
    assert first.usd_per_m_output and first.metrics.requests == 5  # 6 less a warm-up
    ranked = lab.denv("bench", "--model", "llama-3.1-8b", "--hardware", "h200", "--json")
    assert ranked.returncode == 0, ranked.stderr
    rows = json.loads(ranked.stdout)["ranked"]
    assert [(row["result"] in {r.id for r in results}, row["source"]) for row in rows] == [
        (True, "simulated")
    ]
    assert "planned +0 ~0 -0 =2" in lab.reconcile()


def test_ctrl_c_tears_down_and_the_reconciler_leaves_the_trial_alone(lab: Lab) -> None:
    lab.reconcile()
    release = serving(lab)
    process, log = lab.start(
        lab.bench_run("--recipe", RECIPE, "--traffic", str(lab.trace(400, output=4000)))
    )
    try:
        up = wait_for(lambda: trial_up(lab), timeout=60, what="the trial to be ready")
        assert isinstance(up, list)
        # A reconcile pass while the trial runs: nothing to do, and the trial untouched.
        assert "planned +0 ~0 -0 =2" in lab.reconcile()
        assert {u.id: u.pid for u in trial_units(lab) if u.alive} == {u.id: u.pid for u in up}
        assert process.poll() is None, log.read_text()
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=60) == 130, log.read_text()
    finally:
        if process.poll() is None:
            process.kill()
    assert "- stopped trial" in log.read_text()
    assert trial_units(lab) == []
    assert serving(lab) == release


def test_sigterm_tears_down_as_ctrl_c_does(lab: Lab) -> None:
    process, log = lab.start(
        lab.bench_run("--recipe", RECIPE, "--traffic", str(lab.trace(400, output=4000)))
    )
    try:
        wait_for(lambda: trial_up(lab), timeout=60, what="the trial to be ready")
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 130, log.read_text()
    finally:
        if process.poll() is None:
            process.kill()
    assert trial_units(lab) == []


def test_an_engine_that_exits_at_start_is_reported_and_torn_down(lab: Lab) -> None:
    lab.repo.write("recipes/llama-3.1-8b/no-room@1.yaml", NO_ROOM)
    done = subprocess.run(
        lab.bench_run("--recipe", "llama-3.1-8b/no-room@1", "--traffic", str(lab.trace(4))),
        capture_output=True,
        text=True,
        env=lab.env(),
        timeout=240,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "aggregated-0 on lab-h0 exited (exit 1)" in done.stderr, done.stderr
    assert "needs 16.0 GB of weights per GPU" in done.stderr, done.stderr
    assert trial_units(lab) == []
    assert not (lab.repo.path / "results").exists()


def test_an_engine_that_crashes_mid_level_fails_the_run_and_is_torn_down(lab: Lab) -> None:
    process, log = lab.start(
        lab.bench_run("--recipe", RECIPE, "--traffic", str(lab.trace(20)), "--concurrency", "2")
    )
    try:
        up = wait_for(lambda: trial_up(lab), timeout=60, what="the trial to be ready")
        assert isinstance(up, list)
        [engine] = [u for u in up if u.id.endswith(".aggregated-0")]
        faults = urllib.request.Request(
            f"http://{lab.server.address}:{engine.port}/admin/faults",
            data=json.dumps({"crash_after": 2}).encode(),
            method="POST",
        )
        with urllib.request.urlopen(faults, timeout=5) as answer:
            assert answer.status == 200
        assert process.wait(timeout=120) == 1, log.read_text()
    finally:
        if process.poll() is None:
            process.kill()
    text = log.read_text()
    assert f"{engine.id} on lab-h0 exited (exit 70)" in text
    assert trial_units(lab) == []
    assert not (lab.repo.path / "results").exists()  # no file for a level it broke
