"""A host is not trusted: its agent's answers come from a hostile program behind a real sshd
on loopback (tests/security/hostile_host.py), the bot is denv's own code. Every answer is read
into its verb's model or the host is unreachable with the reason; one fleet's hostile host
never stops the pass for the others; a host's paths come from its own report only; answers
are bounded, and a refused one fails the calls waiting on it at once."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from reconciler.fleet.drivers.registry import Drivers
from reconciler.fleet.drivers.ssh import SshDriver
from reconciler.fleet.hostagent import AgentClient
from reconciler.fleet.kinds.agenthosts import weights_dir
from reconciler.fleet.model.observed import Cause, FleetObservation
from reconciler.fleet.ssh import SshTransport
from reconciler.reconcile.snapshot import snapshot
from reconciler.spec.fleet import Fleet, Host
from tests.e2e.bot import bot_env, run_denv
from tests.labs.release import WEIGHTS, release_yaml, stage
from tests.labs.sshd import SshLab, SshServer, ssh_lab, ssh_settings
from tests.reconcile.conftest import GitRepo, git_repo
from tests.security.hostile_host import HostileHost, fleet_file, good_entry

__all__ = ["git_repo", "ssh_lab"]

MIB = 1024 * 1024


@dataclass
class Lab:
    repo: GitRepo
    ssh: SshLab
    good: SshServer
    bad: HostileHost
    cache: Path

    def reconcile(self) -> tuple[int, str]:
        done = run_denv(
            self.repo.path,
            bot_env(self.cache),
            "reconcile",
            "--once",
            "--ready-timeout",
            "60s",
            timeout=240,
        )
        return done.returncode, done.stdout + done.stderr

    def denv(self, *args: str) -> str:
        """What `denv ARGS` shows; it may report a failure (1), never crash (3)."""
        done = run_denv(self.repo.path, bot_env(self.cache), *args, timeout=120)
        assert done.returncode in (0, 1), done.stdout + done.stderr
        return done.stdout + done.stderr

    def alive_on_good(self) -> int:
        host = Host(name="good-h0", address=self.good.address, port=self.good.port, gpus=4)
        agent = AgentClient(SshTransport(host, ssh_settings(self.ssh)), python=sys.executable)
        try:
            return sum(1 for unit in agent.units() if unit.alive)
        finally:
            agent.transport.close()


@pytest.fixture
def lab(git_repo: GitRepo, ssh_lab: SshLab, tmp_path: Path) -> Iterator[Lab]:
    """Two fleets: `good` (the real agent) and `bad` (a hostile host); the release on both."""
    ssh_lab.own_home = True
    good = ssh_lab.start("good")
    bad = HostileHost(ssh_lab, "bad-h0")
    git_repo.write("fleets/good.yaml", fleet_file("good", [good_entry(good, "good-h0")], ssh_lab))
    hostile = fleet_file("bad", [bad.entry()], ssh_lab, python=str(bad.program))
    git_repo.write("fleets/bad.yaml", hostile)
    release = release_yaml(stage("canary", "good, bad"), batch=None)
    git_repo.write("releases/chat-8b/denv.yaml", release)
    git_repo.commit("chat-8b on a good fleet and a hostile one")
    found = Lab(git_repo, ssh_lab, good, bad, tmp_path / "cache")
    yield found
    bad.spoil({})
    for server, name in ((good, "good-h0"), (bad.server, "bad-h0")):
        host = Host(name=name, address=server.address, port=server.port, gpus=4)
        agent = AgentClient(SshTransport(host, ssh_settings(ssh_lab)), python=sys.executable)
        try:  # never leave an engine behind, also when a test failed
            for unit in agent.units():
                agent.stop(unit.id, grace=1)
        except Exception:
            pass
        finally:
            agent.transport.close()


@pytest.mark.parametrize(
    ("rules", "status_says", "probe_says"),
    [
        (
            {"lease": {"patch": {"held": False, "expires": "tomorrow"}}},
            "bad-h0: unreachable: its answer to lease: expires: Input should be a valid number",
            None,
        ),
        (
            {"probe": {"patch": {"gpus": "x"}}},
            "bad-h0 (bad answer)",
            "bad-h0: unreachable: its answer to probe: gpus: Input should be a valid",
        ),
        (  # a lease "held" by another bot for ever: that fleet waits, the other goes on
            {"lease": {"patch": {"held": False, "holder": "other-bot/1", "expires": 4e9}}},
            "fleet bad is being reconciled by other-bot/1",
            None,
        ),
    ],
    ids=["lease-expires-tomorrow", "probe-gpus-x", "lease-held-by-another"],
)
def test_a_hostile_answer_makes_its_host_unreachable_and_the_other_fleet_converges(
    lab: Lab, rules: dict[str, object], status_says: str, probe_says: str | None
) -> None:
    lab.bad.spoil(rules)
    code, output = lab.reconcile()
    assert code in (0, 1) and "Traceback" not in output, output  # never a crash (3)
    assert lab.alive_on_good() == 2, output  # the good fleet converged: engine and router
    shown = lab.denv("status")  # what the operator sees: the host, unreachable, and why
    assert status_says in " ".join(shown.split()), shown
    if probe_says is not None:
        shown = lab.denv("fleet", "probe", "bad")
        assert probe_says in " ".join(shown.split()), shown


def hostile_fleet(lab: SshLab, hosts: list[HostileHost], call_timeout: float = 120) -> Fleet:
    settings = ssh_settings(lab).model_copy(update={"call_timeout": call_timeout})
    return Fleet(
        name="bad",
        provider="test",
        hardware="h200",
        simulated=True,
        transport="ssh",
        ssh=settings,
        python=str(hosts[0].program),
        hosts=[
            Host(name=h.name, address=h.server.address, port=h.server.port, gpus=2) for h in hosts
        ],
    )


def observe_within(driver: SshDriver, timeout: float = 60) -> FleetObservation:
    """The driver's observation, which must come well before the fleet's call deadline (120
    s): a refused answer fails its call at once. What it raised is raised here."""
    found: list[FleetObservation | BaseException] = []

    def observe() -> None:
        try:
            found.append(driver.observe(None))
        except BaseException as exc:
            found.append(exc)

    worker = threading.Thread(target=observe, daemon=True)
    worker.start()
    worker.join(timeout)
    assert found, f"no observation in {timeout}s: the call waited for its deadline"
    if isinstance(found[0], BaseException):
        raise found[0]
    return found[0]


@pytest.fixture
def hostile(ssh_lab: SshLab) -> Iterator[tuple[HostileHost, list[SshDriver]]]:
    ssh_lab.own_home = True
    host = HostileHost(ssh_lab, "bad-h0")
    made: list[SshDriver] = []
    yield host, made
    for driver in made:
        driver.close()


@pytest.mark.parametrize(
    ("rules", "resident", "reason"),
    [
        ({"probe": {"deep": 100_000}}, True, "nested too deep"),
        ({"probe": {"big": 17 * MIB}}, True, "over 16 MiB"),
        ({"probe": {"deep": 100_000}}, False, "nested too deep"),
        ({"probe": {"flood": 48 * MIB}}, False, "over 16 MiB"),
    ],
    ids=["resident-deep", "resident-long-line", "one-shot-deep", "one-shot-flood"],
)
def test_an_answer_beyond_the_bounds_is_refused_at_once_with_the_reason(
    ssh_lab: SshLab,
    hostile: tuple[HostileHost, list[SshDriver]],
    rules: dict[str, object],
    resident: bool,
    reason: str,
) -> None:
    host, made = hostile
    host.spoil(rules)
    driver = SshDriver(hostile_fleet(ssh_lab, [host]))
    driver.resident = resident
    made.append(driver)
    seen = observe_within(driver)
    assert "bad-h0" not in seen.hosts
    assert reason in seen.errors["bad-h0"], seen.errors
    assert seen.causes["bad-h0"] == Cause.BAD_ANSWER
    host.spoil({})  # the host behaves again: the next call opens a new session and works
    assert "bad-h0" in observe_within(driver).hosts


@pytest.mark.parametrize("home", ["relative/denv", "/srv/../etc", ""])
def test_a_home_that_is_not_an_absolute_path_makes_the_host_unreachable(
    ssh_lab: SshLab, hostile: tuple[HostileHost, list[SshDriver]], home: str
) -> None:
    host, made = hostile
    host.spoil({"probe": {"patch": {"home": home}}})
    driver = SshDriver(hostile_fleet(ssh_lab, [host]))
    made.append(driver)
    seen = observe_within(driver)
    assert "bad-h0" not in seen.hosts, seen.hosts
    assert "home: Value error, must be an absolute path" in seen.errors["bad-h0"]
    assert seen.causes["bad-h0"] == Cause.BAD_ANSWER


def test_one_hosts_home_never_sets_another_hosts_paths(git_repo: GitRepo, ssh_lab: SshLab) -> None:
    """Host A reports a home of its choosing; host B's engine loads its weights from B's own
    home (real GPUs, so the engine is given a weights path: the hosts say they have them)."""
    ssh_lab.own_home = True
    first, second = HostileHost(ssh_lab, "a"), HostileHost(ssh_lab, "b")
    gpus = [{"index": 0, "name": "NVIDIA H200", "memory_total_mib": 143771}]
    first.spoil({"probe": {"patch": {"home": "/srv/attacker", "gpus": []}}})
    second.spoil({"probe": {"patch": {"gpus": gpus, "source": "nvml"}}})
    entries = [first.entry(gpus=1), second.entry(gpus=1)]
    text = fleet_file("pair", entries, ssh_lab, python=str(first.program), simulated=False)
    git_repo.write("fleets/pair.yaml", text)
    git_repo.write("releases/chat-8b/denv.yaml", release_yaml(stage("canary", "pair"), batch=None))
    git_repo.commit("chat-8b on a pair of hosts")
    drivers = Drivers()
    try:
        snap = snapshot(git_repo.source(), drivers)
    finally:
        drivers.close()
    assert snap.observations["pair"].hosts["a"].home == "/srv/attacker"
    [deployment] = [d for d in snap.desired.deployments if d.fleet == "pair"]
    engine = next(u for u in deployment.units if u.weights is not None)
    assert engine.host == "b"
    argv = " ".join(engine.unit.argv)
    assert weights_dir(str(second.home), WEIGHTS) in argv, argv
    assert "/srv/attacker" not in argv and "@agent-home@" not in argv, argv
