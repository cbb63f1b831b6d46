"""`denv reconcile` end to end: a git repository, simulated GPU hosts behind real sshd in
network namespaces, simulator engines behind the real sglang-router, the official openai
client through the endpoint."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest

from reconciler.fleet.hostagent import AgentClient
from reconciler.fleet.model.observed import UnitRecord
from reconciler.fleet.ssh import SshTransport
from reconciler.spec.fleet import Host
from tests.e2e.bot import bot_env, run_denv
from tests.e2e.load import ask, light_load
from tests.fleet.conftest import wait_for
from tests.labs.operated import Operated, actions_done
from tests.labs.release import release_yaml, stage
from tests.labs.sshd import SshLab, SshServer, ssh_lab, ssh_settings
from tests.reconcile.conftest import GitRepo

__all__ = ["ssh_lab"]  # the fixture, shared with the fleet tests


def fleet_file(name: str, server: SshServer, lab: SshLab) -> str:
    return (
        f"fleet:\n  name: {name}\n  provider: test\n  hardware: h200\n  simulated: true\n"
        f"  python: {sys.executable}\n  transport: ssh\n"
        f"  ssh: {{ user: root, key_file: {lab.client_key}, known_hosts: {lab.known_hosts}, "
        f"connect_timeout: 2 }}\n"
        f"  hosts:\n    - {{ name: {name}-h0, address: {server.address}, gpus: 4 }}\n"
    )


@dataclass
class Lab(Operated):
    repo: GitRepo
    ssh: SshLab
    servers: dict[str, SshServer]
    cache: Path
    timing: ClassVar[tuple[str, ...]] = ("--ready-timeout", "60s", "--drain", "5s")

    def release(self, replicas: int = 2, batch: int = 128, fleets: str = "lab") -> str:
        text = release_yaml(stage("canary", fleets), replicas=replicas, batch=batch)
        self.repo.write("releases/chat-8b/denv.yaml", text)
        return self.repo.commit(f"chat-8b: {replicas} replicas, max_batch {batch}")

    def denv(self, *args: str, fault: str | None = None) -> subprocess.CompletedProcess[str]:
        return run_denv(self.repo.path, bot_env(self.cache), *args, fault=fault, timeout=240)

    def agent(self, fleet: str = "lab") -> AgentClient:
        server = self.servers[fleet]
        host = Host(name=f"{fleet}-h0", address=server.address, gpus=4)
        return AgentClient(SshTransport(host, ssh_settings(self.ssh)), python=sys.executable)

    def units(self, fleet: str = "lab") -> list[UnitRecord]:
        return self.agent(fleet).units()


@pytest.fixture
def lab(git_repo: GitRepo, ssh_lab: SshLab, tmp_path: Path) -> Iterator[Lab]:
    # hosts of their own: their sessions never run this machine's ~/.bashrc (a pyenv init
    # here, every one of the hundreds of commands the bot and the checks send)
    ssh_lab.own_home = True
    servers = {name: ssh_lab.start(name, namespaced=True) for name in ("lab", "lab2")}
    for name, server in servers.items():
        git_repo.write(f"fleets/{name}.yaml", fleet_file(name, server, ssh_lab))
    found = Lab(git_repo, ssh_lab, servers, tmp_path / "cache")
    yield found
    for name in servers:  # never leave an engine behind, also when a test failed
        try:
            agent = found.agent(name)
            for unit in agent.units():
                agent.stop(unit.id, grace=1)
        except Exception:
            pass


def endpoint(status: dict[str, Any], fleet: str = "lab") -> str:
    [row] = [d for d in status["deployments"] if d["fleet"] == fleet]
    return f"{row['endpoint']}/v1"


def converged(lab: Lab, replicas: int) -> list[UnitRecord]:
    """Status says no drift and every replica ready; the host runs exactly the wanted units,
    no two of them on one GPU. Returns the host's units, exited ones included."""
    status = lab.status()
    [row] = [d for d in status["deployments"] if d["fleet"] == "lab"]
    assert (row["ready"], row["replicas"], row["drift"]) == (replicas, replicas, ""), row
    units = lab.units()
    live = [u for u in units if u.alive]
    assert len(live) == replicas + 1, [u.id for u in live]  # engines and the router
    gpus = [g for u in live for g in u.gpus]
    assert len(gpus) == len(set(gpus)) == replicas
    return units


def test_deploy_scale_and_remove(lab: Lab) -> None:
    lab.release(replicas=2)
    first = lab.reconcile()
    assert actions_done(first.stdout)["start"] == 3, first.stdout  # two engines and the router
    converged(lab, 2)
    assert ask(endpoint(lab.status())).strip()
    assert "planned +0 ~0 -0 =3" in lab.reconcile().stdout  # nothing to do: nothing done
    lab.release(replicas=3)
    lab.reconcile()
    converged(lab, 3)
    lab.release(replicas=1)
    lab.reconcile()
    converged(lab, 1)
    assert ask(endpoint(lab.status())).strip()
    lab.repo.remove("releases/chat-8b")
    lab.repo.commit("chat-8b retired")
    assert "orphaned" in lab.reconcile().stdout  # left running: never stopped without a word
    pruned = lab.denv("prune")
    assert pruned.returncode == 0, pruned.stdout + pruned.stderr
    assert [u.id for u in lab.units() if u.alive] == []


@pytest.mark.parametrize("replicas", [1, 4])
def test_rolling_replace_loses_no_request(lab: Lab, replicas: int) -> None:
    """One replica on the 4-GPU host is covered by a surge replica on a free GPU; four take
    every GPU, so they roll one at a time, the others serving."""
    lab.release(replicas=replicas, batch=128)
    lab.reconcile()
    url = endpoint(lab.status())
    with light_load(url, workers=2) as load:
        load.more(5, "traffic before the roll")
        before = {u.id: u.pid for u in lab.units()}
        lab.release(replicas=replicas, batch=64)
        rolled = lab.reconcile()
        load.more(5, "traffic after the roll")
    assert "~ replace" in rolled.stderr and "max_batch" in rolled.stderr
    assert ("+ surge" in rolled.stderr) == (replicas < 4), rolled.stderr
    assert load.failed == []
    after = {u.id: u.pid for u in lab.units()}
    engines = [i for i in after if not i.endswith("router")]
    assert all(after[i] != before[i] for i in engines)  # every replica was replaced
    converged(lab, replicas)


def test_an_engine_crash_is_restarted_with_backoff(lab: Lab) -> None:
    """The first crash is restarted at once, the second waits the backoff. The backoff is
    the longest there is (5 minutes), so that the pass after the second crash comes within
    it however loaded the machine is; the wait it announces is what the model leaves of it."""
    backoff = ("--crash-backoff", "5m")

    def exited(unit_id: str) -> bool:
        return not next(u for u in lab.units() if u.id == unit_id).alive

    lab.release(replicas=1)
    lab.reconcile(*backoff)
    [engine] = [u for u in lab.units() if not u.id.endswith("router")]
    assert engine.pid is not None
    os.kill(engine.pid, signal.SIGKILL)
    wait_for(lambda: exited(engine.id), timeout=120, what="the first exit")
    lab.reconcile(*backoff)
    again = next(u for u in lab.units() if u.id == engine.id)
    assert again.alive and again.restarts == 1
    assert again.pid is not None
    os.kill(again.pid, signal.SIGKILL)  # it keeps crashing: the next start waits
    wait_for(lambda: exited(engine.id), timeout=120, what="the second exit")
    waiting = lab.reconcile(*backoff)
    found = re.search(r"keeps exiting .*: next start in (\d+)s", waiting.stdout)
    assert found is not None, waiting.stdout
    assert 0 < int(found.group(1)) <= 300  # backoff(1 restart) = min(5m, the 5m cap)
    assert exited(engine.id)


STEPS = ["after-prepare", "after-free", "after-start", "after-routers", "roll-surged",
         "roll-drained", "roll-stopped", "roll-started", "after-roll", "after-trim"]  # fmt: skip


def test_sigkill_at_every_step_converges(lab: Lab) -> None:
    """A roll of one replica with a surge passes every step boundary: the bot is killed at
    each in turn (a new setting each time), and the next pass converges with no duplicate
    and no surge replica left."""
    lab.release(replicas=1, batch=128)
    lab.reconcile()
    for number, step in enumerate(STEPS):
        lab.release(replicas=1, batch=64 + number)
        killed = lab.reconcile(fault=step, ok=False)
        assert killed.returncode == -signal.SIGKILL, (step, killed.stdout + killed.stderr)
        lab.reconcile()
        ids = [u.id for u in converged(lab, 1)]
        assert len(ids) == len(set(ids)) == 2, (step, ids)


def test_two_reconcilers_one_lease(lab: Lab) -> None:
    lab.release(replicas=1)
    agent = lab.agent()
    held = agent.lease("reconciler", "other-bot/1", 30)
    assert held.held
    refused = lab.reconcile(ok=False)
    assert refused.returncode == 1
    assert "being reconciled by other-bot/1" in refused.stderr
    assert [u for u in lab.units() if u.alive] == []  # nothing was touched
    agent.lease("reconciler", "other-bot/1", 0, release=True)
    lab.reconcile()
    converged(lab, 1)


def test_a_host_lost_in_the_middle_of_apply(lab: Lab, tmp_path: Path) -> None:
    """lab2's host goes away after both fleets were observed and leased: lab converges, lab2
    is an error, and the next pass, with the host back, converges it too."""
    lab.release(replicas=1, fleets="lab, lab2")
    marker = tmp_path / "paused"
    env = {**os.environ, "DENV_CACHE": str(lab.cache), "DENV_HOME": str(lab.cache / "home")}
    env["DENV_FAULT_PAUSE_AT"] = f"after-prepare:{marker}"
    argv = [sys.executable, "-m", "reconciler", "reconcile", "--once", "--ready-timeout", "60s"]
    bot = subprocess.Popen(
        [*argv, "--repo", str(lab.repo.path)], env=env, stdout=subprocess.PIPE, text=True
    )
    wait_for(marker.exists, timeout=60, what="the bot to reach apply")
    lab.servers["lab2"].kill()
    marker.unlink()
    out, _ = bot.communicate(timeout=120)
    assert bot.returncode == 1 and "lab2" in out, out
    converged(lab, 1)  # the reachable fleet converged
    lab.ssh.restart(lab.servers["lab2"])
    lab.reconcile()
    assert sum(1 for u in lab.units("lab2") if u.alive) == 2  # retried: engine and router


def test_a_replica_that_never_becomes_ready_is_put_back(lab: Lab) -> None:
    lab.release(replicas=2, batch=128)
    lab.reconcile()
    before = {u.id: u.digest for u in lab.units()}
    url = endpoint(lab.status())
    text = (lab.repo.path / "releases/chat-8b/denv.yaml").read_text()
    broken = "settings: { max_batch: 128, kv_cache: { memory_fraction: 0.05 } }"
    lab.repo.write(
        "releases/chat-8b/denv.yaml", text.replace("settings: { max_batch: 128 }", broken)
    )
    lab.repo.commit("chat-8b: too little memory for the weights")
    failed = lab.reconcile(ok=False)
    assert failed.returncode == 1
    assert "did not become ready; put back on the previous one" in failed.stdout + failed.stderr
    after = {u.id: u.digest for u in lab.units() if u.alive}
    assert after == before  # every unit runs its previous spec, the roll stopped at the first
    assert ask(url).strip()
