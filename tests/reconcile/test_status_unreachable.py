"""`denv status` on a fleet that does not answer (a host on a closed loopback port): it says
the fleet is unreachable and since when — the first failed observation of the streak, kept by
the bot with its lease note on the fleets it reaches, and by `denv status` itself — instead of
`0/0 … DRIFT none`."""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from reconciler.fleet.hostagent import AgentClient
from reconciler.fleet.transport import LocalTransport
from reconciler.reconcile.loop import Reconciler
from reconciler.reconcile.reach import stamp
from reconciler.reconcile.snapshot import LEASE
from tests.fleet.conftest import free_port
from tests.reconcile.conftest import GitRepo

RELEASE = "releases/chat-8b/denv.yaml"
T0 = 1_700_000_000.0  # 2023-11-14, before the test runs: only the bot's record can say it


def lab_fleet(repo: GitRepo, tmp_path: Path) -> None:
    """A fleet of one SSH host on a loopback port nothing listens on."""
    repo.write(
        "fleets/lab.yaml",
        "fleet:\n  name: lab\n  provider: test\n  hardware: h200\n  simulated: true\n"
        f"  transport: ssh\n  ssh: {{ user: root, key_file: {tmp_path / 'no-key'}, "
        "connect_timeout: 2 }\n"
        f"  hosts:\n    - {{ name: n0, address: 127.0.0.1, port: {free_port()}, gpus: 4 }}\n",
    )


def status(repo: GitRepo, env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "reconciler", "status", "--repo", str(repo.path), *args],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    return done.stdout


@pytest.fixture
def env(git_repo: GitRepo, tmp_path: Path) -> dict[str, str]:
    found = {**os.environ, "DENV_HOME": str(tmp_path / "home"), "DENV_CACHE": str(git_repo.cache)}
    found["XDG_STATE_HOME"] = str(tmp_path / "state")
    found.pop("DENV_REPO", None)
    return found


def test_an_unreachable_fleet_is_said_so_with_the_first_failed_look(
    git_repo: GitRepo, env: dict[str, str], tmp_path: Path
) -> None:
    lab_fleet(git_repo, tmp_path)
    git_repo.replace(RELEASE, "fleets: [local]\n    bake: 10m", "fleets: [lab]\n    bake: 10m")
    git_repo.commit("the canary on a fleet that does not answer")

    text = status(git_repo, env)
    row = next(line for line in text.splitlines() if " lab " in line)
    # READY, STATE, ENDPOINT, DRIFT: not 0/0 … none
    assert row.split()[-8:] == ["?", "waiting", "for", "the", "bot", "—", "unknown:", "unreachable"]
    found = re.search(r"^lab: UNREACHABLE since (\S+ \S+ UTC) \((\d+)s ago\): ", text, re.M)
    assert found is not None, text
    assert "n0 (refused)" in text

    answer = json.loads(status(git_repo, env, "--json"))  # a second look: the same streak
    lab = answer["unreachable"]["lab"]
    assert lab["whole"] is True and lab["hosts"]["n0"]["cause"] == "refused"
    assert stamp(lab["since"]) == found[1]  # since the first failed look, not this one
    (deployment,) = answer["deployments"]
    assert deployment["ready"] is None and deployment["drift"] is None
    assert deployment["unreachable_since"] == lab["since"]
    assert deployment["unreachable_hosts"] == ["n0"]


@pytest.fixture
def on_local(git_repo: GitRepo, env: dict[str, str]) -> Iterator[AgentClient]:
    """The local fleet on a loopback address of its own (ports clear of other tests); its
    units are stopped at the end."""
    address = f"127.{random.randint(64, 254)}.{random.randint(0, 254)}.1"
    git_repo.replace(
        "fleets/local.yaml",
        "- { name: localhost, gpus: 16 }",
        f"- {{ name: localhost, address: {address}, gpus: 16 }}",
    )
    client = AgentClient(LocalTransport(env=env), python=sys.executable)
    yield client
    for unit in client.units():
        client.stop(unit.id, grace=1)


def test_the_bot_keeps_the_streak_with_its_note_across_passes_and_restarts(
    git_repo: GitRepo,
    env: dict[str, str],
    tmp_path: Path,
    on_local: AgentClient,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lab_fleet(git_repo, tmp_path)
    git_repo.replace(
        RELEASE, "fleets: [local]\n    bake: 10m", "fleets: [local, lab]\n    bake: 10m"
    )
    git_repo.replace(RELEASE, "replicas: 2", "replicas: 1")
    git_repo.commit("the canary on a fleet that answers and one that does not")
    monkeypatch.setenv("DENV_HOME", env["DENV_HOME"])

    def noted() -> dict[str, dict[str, float | str]]:
        note = on_local.lease(LEASE, "status", 0, peek=True).note
        found: dict[str, dict[str, float | str]] = note["unreachable"]["lab"]
        return found

    bot = Reconciler(git_repo.source(), clock=lambda: T0)
    try:
        bot.run_pass()
        assert noted() == {"n0": {"since": T0, "cause": "refused"}}
        bot.clock = lambda: T0 + 60
        bot.run_pass()  # the next pass of the same bot
        assert noted() == {"n0": {"since": T0, "cause": "refused"}}
    finally:
        bot.close()
    restarted = Reconciler(git_repo.source(), clock=lambda: T0 + 120)
    try:
        restarted.run_pass()  # continues the streak of the note it reads with the lease
        assert noted() == {"n0": {"since": T0, "cause": "refused"}}
    finally:
        restarted.close()

    answer = json.loads(status(git_repo, env, "--json"))
    assert answer["unreachable"]["lab"]["since"] == T0  # the bot's record, not this look
    assert f"lab: UNREACHABLE since {stamp(T0)} (" in status(git_repo, env)
