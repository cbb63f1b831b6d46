"""`denv reconcile` as a long-running bot on the local fleet: the loop converges and stays
converged, SIGTERM ends it with exit 0 and leaves the units running — within seconds also
while a prepare job blocks, which the next pass resumes — and `--metrics-port` serves the
pass figures on /metrics."""

from __future__ import annotations

import os
import queue
import random
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from reconciler.fleet.hostagent import AgentClient
from reconciler.fleet.transport import LocalTransport
from tests.fleet.conftest import free_port, wait_for
from tests.reconcile.conftest import GitRepo
from tests.reconcile.stub_engines import StubIndex, fake_nvidia_smi

FLEET = "fleets/local.yaml"
RELEASE = "releases/chat-8b/denv.yaml"
LOCALHOST = "- { name: localhost, gpus: 16 }"
CONVERGED = "planned +0 ~0 -0 =3; done: nothing"  # two engines and the router kept


class Bot:
    """`denv reconcile` in loop mode, its stdout (one summary line per pass) read as it comes."""

    def __init__(
        self, repo: GitRepo, home: Path, *args: str, env: dict[str, str] | None = None
    ) -> None:
        env = {**os.environ, "DENV_HOME": str(home), "DENV_CACHE": str(repo.cache), **(env or {})}
        env.pop("DENV_REPO", None)
        argv = [sys.executable, "-m", "reconciler", "reconcile", "--repo", str(repo.path)]
        argv += ["--ready-timeout", "60s", "--drain", "5s", *args]
        self.stderr = (home.parent / "bot.stderr").open("w")  # no pipe left to fill
        self.process = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=self.stderr, text=True, env=env
        )
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)

    def expect(self, text: str, timeout: float = 120) -> str:
        """The next summary line that contains `text` within `timeout` (earlier lines are
        passed over: a bot that keeps passing without it fails here too, with its lines)."""
        deadline = time.monotonic() + timeout
        seen: list[str] = []
        try:
            while True:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
                if text in line:
                    return line
                seen.append(line.rstrip())
        except queue.Empty:
            last = "\n  ".join(seen[-8:]) or "none"
            raise AssertionError(
                f"no pass line with {text!r} in {timeout}s; the last lines:\n  {last}"
            ) from None

    def terminate(self, timeout: float = 60) -> int:
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=timeout)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)
        self.stderr.close()


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def repo(git_repo: GitRepo) -> GitRepo:
    """The example release on the local fleet, whose host listens on a loopback address of
    its own: ports 8000+ stay clear of the demo and of other tests."""
    address = f"127.{random.randint(64, 254)}.{random.randint(0, 254)}.1"
    git_repo.replace(FLEET, LOCALHOST, f"- {{ name: localhost, address: {address}, gpus: 16 }}")
    git_repo.commit("the local fleet on its own address")
    return git_repo


@pytest.fixture
def agent(home: Path) -> Iterator[AgentClient]:
    client = AgentClient(LocalTransport(env={**os.environ, "DENV_HOME": str(home)}))
    yield client
    for unit in client.units():  # the bot leaves them running: stop them here
        client.stop(unit.id, grace=1)


@pytest.fixture
def bots() -> Iterator[list[Bot]]:
    started: list[Bot] = []
    yield started
    for bot in started:
        bot.close()


def scrape(port: int) -> dict[str, float]:
    """Every sample of the bot's /metrics: 'name{label="value"}' -> value."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
        text = answer.read().decode()
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
            samples[f"{sample.name}{{{labels}}}" if labels else sample.name] = sample.value
    return samples


def test_the_loop_converges_and_sigterm_leaves_the_units_running(
    repo: GitRepo, home: Path, agent: AgentClient, bots: list[Bot]
) -> None:
    port = free_port()
    bot = Bot(repo, home, "--interval", "1s", "--metrics-port", str(port))
    bots.append(bot)
    bot.expect("planned +3 ~0 -0 =0; done: start 3")
    bot.expect(CONVERGED)  # the next pass, a second later, finds nothing to do
    metrics = scrape(port)
    assert metrics["denv_reconcile_pass_seconds_count"] >= 2
    assert metrics['denv_reconcile_actions_total{kind="start"}'] == 3
    assert metrics["denv_reconcile_drift_actions"] == 0  # the fleet matches git
    running = {u.id: u.pid for u in agent.units() if u.alive}
    assert sorted(running) == [
        "chat-8b.canary.local.aggregated-0",
        "chat-8b.canary.local.aggregated-1",
        "chat-8b.canary.local.router",
    ]

    assert bot.terminate() == 0
    assert {u.id: u.pid for u in agent.units() if u.alive} == running  # left as planned
    lease = agent.lease("reconciler", "test", 0, peek=True)
    assert lease.holder is None  # given back: the next bot need not wait for its expiry
    assert CONVERGED in (lease.note or {})["summary"]  # `denv status` shows the last pass


def test_metrics_are_served_while_the_loop_waits_for_its_next_pass(
    repo: GitRepo, home: Path, agent: AgentClient, bots: list[Bot]
) -> None:
    port = free_port()
    bot = Bot(repo, home, "--interval", "10m", "--metrics-port", str(port))
    bots.append(bot)
    bot.expect("done: start 3")
    metrics = wait_for(
        lambda: (m := scrape(port))["denv_reconcile_pass_seconds_count"] == 1 and m,
        what="the first pass in /metrics",
    )
    assert isinstance(metrics, dict)
    assert 0 < metrics["denv_reconcile_pass_seconds_sum"] < 120
    assert metrics['denv_reconcile_actions_total{kind="start"}'] == 3
    assert metrics["denv_reconcile_drift_actions"] == 3  # what that pass's plan needed
    assert metrics["denv_reconcile_errors_total"] == 0
    assert bot.terminate(timeout=30) == 0  # SIGTERM ends the wait for the next pass


def test_the_loop_waits_while_another_bot_holds_the_lease(
    repo: GitRepo, home: Path, agent: AgentClient, bots: list[Bot]
) -> None:
    agent.lease("reconciler", "other-bot/1", 600)
    bot = Bot(repo, home, "--interval", "1s")
    bots.append(bot)
    said = home.parent / "bot.stderr"
    refusal = "pass failed: fleet local is being reconciled by other-bot/1"
    wait_for(lambda: said.read_text().count(refusal) >= 2, timeout=60, what="two refused passes")
    assert bot.process.poll() is None and agent.units() == []  # waiting, nothing touched
    agent.lease("reconciler", "other-bot/1", 0, release=True)
    bot.expect("done: start 3")
    assert bot.terminate() == 0


def test_sigterm_during_a_pass_finishes_the_action_and_the_next_bot_converges(
    repo: GitRepo, home: Path, agent: AgentClient, bots: list[Bot]
) -> None:
    bot = Bot(repo, home, "--interval", "1s")
    bots.append(bot)
    wait_for(lambda: agent.units(), timeout=120, what="the first unit launched")
    # the engines and the router launch at once: no later action to see it not start
    # (tests/reconcile/test_apply_parallel.py shows that SIGTERM starts none)
    assert bot.terminate() == 0

    again = Bot(repo, home, "--once")
    bots.append(again)
    line = again.expect("planned")  # what the first left not started (or nothing: all were)
    assert "error" not in line, line
    assert again.process.wait(timeout=60) == 0
    ids = [u.id for u in agent.units() if u.alive]
    assert len(ids) == len(set(ids)) == 3


@pytest.fixture
def index() -> Iterator[StubIndex]:
    server = StubIndex().start()
    yield server
    server.stop()


def test_sigterm_during_prepare_ends_the_bot_within_seconds_and_the_next_pass_resumes(
    repo: GitRepo, home: Path, agent: AgentClient, bots: list[Bot], index: StubIndex,
    tmp_path: Path,
) -> None:  # fmt: skip
    """The local fleet as real GPUs would be (an nvidia-smi of ours lists two), engines in
    venvs that prepare builds with pip from an index that holds its answer: SIGTERM while
    both jobs wait in pip ends the bot within the 10 s operators are promised, with nothing
    started and no venv taken as built; the next bot joins the same jobs once the index
    answers, and starts the deployment."""
    weights = tmp_path / "ckpt"
    weights.mkdir()
    (weights / "config.json").write_text("{}")
    repo.replace(FLEET, "simulated: true", "simulated: false\n  runtime: venv")
    repo.replace(FLEET, "gpus: 16 }", "gpus: 2 }")
    repo.replace(
        FLEET, "trial_gpus: 8", f"trial_gpus: 0\n  weights: {{ roots: ['file://{weights}'] }}"
    )
    repo.replace(RELEASE, "replicas: 2", "replicas: 1")
    hf = "hf://meta-llama/Llama-3.1-8B-Instruct@0e9e39f249a16976918f6564b8830bc894c89659"
    repo.replace(RELEASE, hf, f"file://{weights}")
    repo.commit("stub GPUs, engines in venvs, local weights")
    env = {
        "PATH": f"{fake_nvidia_smi(tmp_path / 'bin')}:{os.environ['PATH']}",
        "PIP_INDEX_URL": index.url,
        "PIP_TIMEOUT": "600",  # pip waits on the held page; it does not give up and retry
        "PIP_RETRIES": "0",
    }
    bot = Bot(repo, home, "--interval", "1s", env=env)
    bots.append(bot)
    assert index.asked.wait(timeout=120), "no prepare job reached pip"
    bot.process.send_signal(signal.SIGTERM)
    assert bot.process.wait(timeout=10) == 0  # the bound: 10 s after SIGTERM
    assert "the next pass resumes it" in bot.expect("waiting: prepare")
    assert agent.units() == []  # nothing started on a host whose runtimes are not ready
    assert list((home / "engines").glob("*/.denv-complete")) == []  # no venv taken as built

    index.release()
    again = Bot(repo, home, "--once", env=env)
    bots.append(again)
    again.expect("planned +2 ~0 -0 =0; done: start 2")
    assert again.process.wait(timeout=60) == 0
    assert index.pages == {"vllm": 1, "sglang-router": 1}  # the jobs were joined, not redone
    assert sorted(u.id for u in agent.units() if u.alive) == [
        "chat-8b.canary.local.aggregated-0",
        "chat-8b.canary.local.router",
    ]
