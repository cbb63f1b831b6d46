"""The host agent keeps what a pull request proposes away from the host's own files and secrets.

Reproductions, against the real agent: over a real sshd on loopback for weights (as the bot
reaches a host), and as a local fleet's agent for environments (it runs in the bot's own
environment, where every variable below would be).

- A release's `weights: file:///home/denv/.ssh` was hard-linked into the cache and mounted
  into the PR's container: a file:// or s3:// source must lie under one of the trusted fleet's
  `weights.roots`, by its real path; nothing is ever hard-linked into the cache.
- The weights token reached pip builds and the s3 command; PIP_* with an index password
  reached engines.
- Code run as the agent's user replaced the agent file, said hello with the expected digest
  and received the next `prepare` with its token: the file is checked before every start by
  the host's sha256sum against the digest the bot computed, never by the file itself.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reconciler.engines.runtime import Need
from reconciler.fleet.hostagent import AgentClient, AgentFailed, agent_source
from reconciler.fleet.prepare import PrepareFailed, follow, prepare_payload, weights_request
from reconciler.fleet.ssh import SshTransport
from reconciler.fleet.transport import LocalTransport
from reconciler.spec.fleet import Fleet, Host
from tests.conftest import require_installed
from tests.fleet.conftest import wait_for
from tests.labs.sshd import SshLab, ssh_settings

TOKEN = "hf_securityTestSecret0123456789"
INDEX_PASSWORD = "pip-index-password-0123"


def fleet(*roots: str, s3_command: list[str] | None = None) -> Fleet:
    weights: dict[str, Any] = {"roots": list(roots), "token_env": "DENV_TEST_HF_TOKEN"}
    if s3_command is not None:
        weights["s3_command"] = s3_command
    return Fleet.model_validate(
        {
            "name": "lab",
            "provider": "local",
            "hardware": "h200",
            "transport": "local",
            "hosts": [{"name": "a", "gpus": 0}],
            "weights": weights,
        }
    )


@pytest.fixture
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshLab]:
    ssh = SshLab(tmp_path_factory.mktemp("ssh"), own_home=True, own_addresses=True)
    try:
        yield ssh
    finally:
        ssh.stop()


@pytest.fixture
def host(lab: SshLab) -> Iterator[tuple[AgentClient, Path]]:
    """The real agent on a real SSH host, and that host's DENV_HOME."""
    server = lab.start("a")
    transport = SshTransport(
        Host(name="a", address=server.address, gpus=0), ssh_settings(lab, server.port)
    )
    client = AgentClient(transport, python=sys.executable)
    yield client, lab.folder / "a" / "denv-home"
    client.close()


def prepare(agent: AgentClient, spec: Fleet, source: str) -> dict[str, Any]:
    """What the bot does before a start: the fleet's weights request, followed to the end."""
    payload = prepare_payload([], weights_request(spec, source, secrets=None), "a")
    state = follow("a", agent.prepare, payload, lambda _: None, timeout=60)
    assert state is not None
    return state.model_dump()


def cached_files(home: Path) -> list[Path]:
    weights = home / "weights"
    return [p for p in weights.rglob("*") if p.is_file() and not p.name.startswith(".lock-")]


@pytest.fixture
def secrets_dir(tmp_path: Path) -> Path:
    """A folder like ~/.ssh: what must never enter the cache."""
    folder = tmp_path / "home" / ".ssh"
    folder.mkdir(parents=True)
    (folder / "id_ed25519").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nsecret\n")
    return folder


@pytest.fixture
def models(tmp_path: Path) -> Path:
    folder = tmp_path / "models"
    (folder / "tiny").mkdir(parents=True)
    (folder / "tiny" / "config.json").write_text("{}")
    (folder / "tiny" / "model.safetensors").write_bytes(b"w" * 4096)
    return folder


def test_a_file_source_outside_every_root_never_enters_the_cache(
    host: tuple[AgentClient, Path], secrets_dir: Path, models: Path
) -> None:
    agent, home = host
    spec = fleet(f"file://{models}")
    escapes = {
        "the folder itself": f"file://{secrets_dir}",
        "the whole filesystem": "file:////",
        "a dot-dot out of the root": f"file://{models}/../home/.ssh",
    }
    (models / "link").symlink_to(secrets_dir)
    escapes["a symlinked folder under the root"] = f"file://{models}/link"
    (models / "mixed").mkdir()
    (models / "mixed" / "config.json").write_text("{}")
    (models / "mixed" / "key").symlink_to(secrets_dir / "id_ed25519")
    escapes["a symlinked file under the root"] = f"file://{models}/mixed"
    for what, source in escapes.items():
        with pytest.raises(PrepareFailed) as refused:
            prepare(agent, spec, source)
        assert "outside the fleet's weights roots" in str(refused.value) or (
            "links outside the root" in str(refused.value)
        ), what
        assert cached_files(home) == [], what
    with pytest.raises(PrepareFailed, match="declares no file:// root"):
        prepare(agent, fleet(), f"file://{models}/tiny")


def test_a_file_source_under_a_root_is_copied_never_linked(
    host: tuple[AgentClient, Path], models: Path
) -> None:
    agent, _ = host
    state = prepare(agent, fleet(f"file://{models}"), f"file://{models}/tiny")
    assert state["state"] == "done", state
    cached = Path(state["weights"]["path"])
    source = models / "tiny" / "model.safetensors"
    assert (cached / "model.safetensors").read_bytes() == source.read_bytes()
    assert (cached / "model.safetensors").stat().st_ino != source.stat().st_ino
    assert source.stat().st_nlink == 1  # the source's own inode never gained a second name


def environment_dump(out: Path) -> list[str]:
    """An s3 command that writes its own environment as the only file it fetches."""
    code = "import json, os, sys; json.dump(dict(os.environ), open(sys.argv[1] + '/env.json', 'w'))"
    return [sys.executable, "-c", code, "{dest}"]


def test_an_s3_source_outside_every_root_runs_no_command(
    host: tuple[AgentClient, Path], tmp_path: Path
) -> None:
    agent, home = host
    spec = fleet("s3://models/public", s3_command=environment_dump(tmp_path))
    for source in ("s3://other/x", "s3://models/publicity", "s3://models/public/../private"):
        with pytest.raises(PrepareFailed, match="outside the fleet's weights roots"):
            prepare(agent, spec, source)
    assert cached_files(home) == []


def test_the_weights_token_does_not_reach_the_s3_command(
    host: tuple[AgentClient, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent, _ = host
    monkeypatch.setenv("DENV_TEST_HF_TOKEN", TOKEN)  # the bot's variable the fleet names
    spec = fleet("s3://models", s3_command=environment_dump(tmp_path))
    state = prepare(agent, spec, "s3://models/tiny")
    assert state["state"] == "done", state
    seen = json.loads((Path(state["weights"]["path"]) / "env.json").read_text())
    assert seen.get("PATH")
    assert TOKEN not in json.dumps(seen)


# --- a local fleet's agent, in the bot's environment ----------------------------------------


class HeldIndex:
    """A package index that accepts pip's connection and never answers: pip waits in it."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.asked = threading.Event()
        self.held: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self.server.accept()
            except OSError:
                return
            self.held.append(connection)
            self.asked.set()

    def close(self) -> None:
        self.server.close()
        for connection in self.held:
            connection.close()


def environ_of(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    return dict(item.split("=", 1) for item in raw.decode().split("\0") if "=" in item)


def descendants(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        parent = todo.pop()
        for task in Path(f"/proc/{parent}/task").iterdir():
            children = (task / "children").read_text().split()
            found += [int(c) for c in children]
            todo += [int(c) for c in children]
    return found


def test_pip_builds_never_see_the_weights_token(tmp_path: Path) -> None:
    index = HeldIndex()
    url = f"http://denv:{INDEX_PASSWORD}@127.0.0.1:{index.port}/simple"
    env = {**os.environ, "DENV_HOME": str(tmp_path / "home"), "PIP_INDEX_URL": url}
    agent = AgentClient(LocalTransport(env={**env, "PIP_TIMEOUT": "600", "PIP_RETRIES": "0"}))
    need = Need(kind="venv", name="six-held", packages=("six==1.16.0",))
    weights = {"source": "hf://org/repo@0123456", "host": None, "token": TOKEN}
    payload = prepare_payload([need], weights, "a")
    state: dict[str, Any] = agent.prepare(payload, 0)
    try:
        assert index.asked.wait(timeout=120), "pip never reached the index"
        pips = [
            p
            for p in descendants(state["pid"])
            if b"pip" in Path(f"/proc/{p}/cmdline").read_bytes()
        ]
        assert pips, "no pip process under the prepare job"
        seen = environ_of(pips[0])
        assert seen["PIP_INDEX_URL"] == url  # pip keeps its own settings
        assert TOKEN not in json.dumps(seen)
    finally:
        os.killpg(state["pid"], signal.SIGKILL)
        index.close()


def test_an_engine_never_sees_pip_credentials(tmp_path: Path) -> None:
    url = f"https://denv:{INDEX_PASSWORD}@pypi.example/simple"
    env = {**os.environ, "DENV_HOME": str(tmp_path / "home"), "PIP_INDEX_URL": url}
    env["PIP_CLIENT_CERT"] = str(tmp_path / "client.pem")
    agent = AgentClient(LocalTransport(env=env))
    unit = {
        "id": "engine",
        "digest": "d1",
        "port": 1,
        "gpus": [],
        "argv": [sys.executable, "-c", "import time; time.sleep(600)"],
        "env": {"DENV_TEST": "1"},
    }
    try:
        launched = agent.launch(unit)
        assert launched.pid is not None
        seen = environ_of(launched.pid)
    finally:
        agent.stop("engine", grace=1)
    assert seen["DENV_TEST"] == "1" and seen["PATH"]
    assert [name for name in seen if name.startswith("PIP_")] == []
    assert INDEX_PASSWORD not in json.dumps(seen)
    wait_for(lambda: not agent.units() or not agent.units()[0].alive, what="the engine stopped")


# --- the agent's file is checked before every start, not by itself ---------------------------

IMPOSTOR = """
import json, sys
log = open(sys.argv[0] + ".seen", "a")
log.write(json.dumps(sys.argv[1:]) + "\\n")
if sys.argv[1:2] == ["serve"]:
    print(json.dumps({{"hello": {{"digest": "{digest}"}}}}), flush=True)
for line in sys.stdin:
    log.write(line)
    log.flush()
    print(json.dumps({{"id": json.loads(line).get("id"), "ok": True, "result": {{}}}}), flush=True)
"""


@pytest.mark.parametrize("resident", [True, False], ids=["resident", "one-shot"])
def test_a_replaced_agent_file_is_replaced_again_before_it_runs(
    lab: SshLab, resident: bool, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    server = lab.start("a")
    settings = ssh_settings(lab, server.port)
    hosted = Host(name="a", address=server.address, gpus=0)
    first = AgentClient(SshTransport(hosted, settings), python=sys.executable, resident=resident)
    first.runtimes()  # installs the agent on the host
    first.close()
    digest = agent_source()[1]
    installed = lab.folder / "a" / "denv-home" / "agent" / f"{digest}.pyz"
    assert installed.read_bytes() == agent_source()[0]
    installed.write_text(IMPOSTOR.format(digest=digest))  # what a process of its user may do

    monkeypatch.setenv("DENV_TEST_HF_TOKEN", TOKEN)
    spec = fleet(f"file://{tmp_path}")
    second = AgentClient(SshTransport(hosted, settings), python=sys.executable, resident=resident)
    try:
        payload = prepare_payload(
            [], weights_request(spec, f"file://{tmp_path}/none", secrets=None), "a"
        )
        with pytest.raises(PrepareFailed, match="no such folder"):  # the real agent answered
            follow("a", second.prepare, payload, lambda _: None, timeout=60)
    finally:
        second.close()
    assert installed.read_bytes() == agent_source()[0]
    assert not installed.with_name(installed.name + ".seen").exists()  # it never ran


# --- a trial's engine runs as the trial user, never as the agent's ----------------------------

TRIAL_USER = "denv-trial-test"
# What code a pull request proposes would try, as the engine it starts: write the agent's
# file, its records, the weights cache, an engine environment.
ATTACK = """
import json, os, sys
home = sys.argv[1]
tried = {}
for path in sys.argv[2:]:
    try:
        with open(path, "a") as target:
            target.write("owned")
        tried[path] = "written"
    except OSError as exc:
        tried[path] = type(exc).__name__
print(json.dumps({"uid": os.getuid(), "cwd": os.getcwd(), "home": os.environ["HOME"],
                  "tried": tried}), flush=True)
"""


@pytest.fixture
def trial_user() -> int:
    """The trial user, created once (CI runs as root; nothing may skip there)."""
    if os.geteuid() != 0:
        require_installed(False, "root, to create a trial user and switch to it", "test")
    done = subprocess.run(["id", "-u", TRIAL_USER], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        subprocess.run(
            ["useradd", "--system", "--user-group", "--no-create-home", "--shell",
             "/usr/sbin/nologin", TRIAL_USER],
            check=True,
        )  # fmt: skip
        done = subprocess.run(["id", "-u", TRIAL_USER], capture_output=True, text=True, check=True)
    return int(done.stdout)


@pytest.fixture
def trial_host() -> Iterator[tuple[AgentClient, Path]]:
    """The real agent on a real SSH host whose home is kept as an operator keeps it: 0755, on
    a path every user may enter (the trial user reads environments and weights from it)."""
    folder = Path(tempfile.mkdtemp(prefix="denv-trial-", dir="/var/tmp"))
    folder.chmod(0o755)
    lab = SshLab(folder / "ssh", own_home=True)
    try:
        server = lab.start("a")
        settings = ssh_settings(lab, server.port)
        transport = SshTransport(Host(name="a", address=server.address, gpus=0), settings)
        agent = AgentClient(transport, python=sys.executable)
        yield agent, lab.folder / "a" / "denv-home"
        for unit in agent.units():
            agent.stop(unit.id, grace=1)
        agent.close()
    finally:
        lab.stop()
        shutil.rmtree(folder, ignore_errors=True)


def attack_unit(home: Path, targets: list[Path]) -> dict[str, Any]:
    python = shutil.which("python3", path="/usr/bin:/usr/local/bin:/bin") or sys.executable
    argv = [python, "-c", ATTACK, str(home), *map(str, targets)]
    return {"id": "trial-engine", "digest": "d1", "gpus": [], "argv": argv, "user": TRIAL_USER}


def test_a_trials_engine_runs_as_the_trial_user_and_cannot_touch_the_agent(
    trial_user: int, trial_host: tuple[AgentClient, Path]
) -> None:
    agent, trial_home = trial_host
    agent.runtimes()  # the agent installed, its home made
    cached = trial_home / "weights" / "0123456789abcdef"
    cached.mkdir(parents=True)
    (cached / "model.safetensors").write_bytes(b"w" * 64)
    agent_file = trial_home / "agent" / f"{agent_source()[1]}.pyz"
    targets = [agent_file, cached / "model.safetensors", trial_home / "units" / "x.json"]
    launched = agent.launch(attack_unit(trial_home, targets))
    log = Path(launched.log or "")
    wait_for(lambda: not agent.units()[0].alive, what="the trial's engine to exit")
    seen = json.loads(log.read_text().strip().splitlines()[-1])
    assert seen["uid"] == trial_user
    assert seen["cwd"] == seen["home"] == str(trial_home / "trials" / "trial-engine")
    assert seen["tried"] == {str(path): "PermissionError" for path in targets}
    assert agent_file.read_bytes() == agent_source()[0]
    assert (cached / "model.safetensors").read_bytes() == b"w" * 64
    agent.stop("trial-engine", grace=1)
    assert not (trial_home / "trials" / "trial-engine").exists()


def test_no_trial_starts_while_the_trial_user_can_write_the_cache(
    trial_user: int, trial_host: tuple[AgentClient, Path]
) -> None:
    agent, trial_home = trial_host
    agent.runtimes()
    cached = trial_home / "weights" / "0123456789abcdef"
    cached.mkdir(parents=True)
    (cached / "model.safetensors").write_bytes(b"w" * 64)
    (cached / "model.safetensors").chmod(0o666)  # an operator's mistake
    with pytest.raises(AgentFailed, match=f"the trial user {TRIAL_USER} can write {cached}"):
        agent.launch(attack_unit(trial_home, []))
    assert agent.units() == []
    (cached / "model.safetensors").chmod(0o644)
    os.chown(trial_home / "agent", trial_user, -1)  # the agent's folder, given away
    with pytest.raises(AgentFailed, match=f"can write {trial_home / 'agent'}"):
        agent.launch(attack_unit(trial_home, []))
    assert agent.units() == []
