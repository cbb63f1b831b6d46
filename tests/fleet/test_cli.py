"""`denv fleet list/probe/logs` against the local fleet and against sshd hosts in network
namespaces, one of them unreachable."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from reconciler.fleet.hostagent import AgentClient
from reconciler.fleet.transport import LocalTransport
from tests.conftest import ROOT
from tests.fleet.conftest import SilentListener, free_port
from tests.forge.gitrepo import init_repo
from tests.labs.sshd import SshLab, keygen


def denv(
    *args: str, home: Path, cwd: Path = ROOT, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DENV_HOME": str(home), **(env or {})}
    for name in ("DENV_REPO", "DENV_FORGE", "GITHUB_ACTIONS", "DENV_DEBUG"):
        env.pop(name, None)  # the local forge, this repository, no debug output
    return subprocess.run(
        [sys.executable, "-m", "reconciler", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=120,
    )


def test_fleet_list_shows_live_figures_of_the_local_fleet(tmp_path: Path) -> None:
    home = tmp_path / "home"
    agent = AgentClient(
        LocalTransport(env={**os.environ, "DENV_HOME": str(home)}), python=sys.executable
    )
    agent.launch(
        {
            "id": "busy",
            "digest": "b",
            "gpus": [0, 1],
            "argv": [sys.executable, "-c", "import time; time.sleep(60)"],
        }
    )
    try:
        fleets = {
            f["fleet"]: f
            for f in json.loads(denv("fleet", "list", "--json", home=home).stdout)["fleets"]
        }
        local = fleets["local"]
        assert local["figures"] == "live"
        assert (local["gpus"], local["units"], local["free_gpus"]) == (16, 1, 16 - 2 - 8)
        assert fleets["h200-use1"]["figures"] == "declared"  # SSH fleets: only with --probe all
        table = denv("fleet", "list", home=home).stdout
        assert "UNITS" in table and "declared in fleets" in table
    finally:
        agent.stop("busy", grace=1)


def test_probe_of_a_fleet_without_units_says_none(tmp_path: Path) -> None:
    run = denv("fleet", "probe", "local", home=tmp_path / "home")
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[lines.index("local: units") + 1 :] == [" none"]  # not a header over nothing


def _lab_repo(tmp_path: Path, lab: SshLab, addresses: list[str]) -> Path:
    repo = tmp_path / "repo"
    for folder in ("catalog", "recipes", "policies"):
        shutil.copytree(ROOT / folder, repo / folder)
    (repo / "fleets").mkdir()
    hosts = "\n".join(
        f"    - {{ name: n{i}, address: {a}, gpus: 4 }}" for i, a in enumerate(addresses)
    )
    (repo / "fleets" / "lab.yaml").write_text(
        "fleet:\n  name: lab\n  provider: test\n  hardware: h200\n  simulated: true\n"
        f"  transport: ssh\n  ssh: {{ user: root, key_file: {lab.client_key}, "
        f"known_hosts: {lab.known_hosts}, connect_timeout: 2 }}\n  hosts:\n{hosts}\n"
    )
    return repo


def test_probe_over_ssh_with_one_host_down(tmp_path: Path, ssh_lab: SshLab) -> None:
    servers = [ssh_lab.start(f"n{i}", namespaced=True) for i in range(3)]
    repo = _lab_repo(tmp_path, ssh_lab, [s.address for s in servers])
    servers[1].kill()
    run = denv("fleet", "probe", "lab", "--json", home=tmp_path / "home", cwd=repo)
    assert run.returncode == 1, run.stderr
    seen = json.loads(run.stdout)
    assert sorted(seen["hosts"]) == ["n0", "n2"]
    assert all(len(h["gpus"]) == 4 and h["source"] == "simulated" for h in seen["hosts"].values())
    assert list(seen["errors"]) == ["n1"] and "not reached: refused" in seen["errors"]["n1"]
    listed = json.loads(
        denv("fleet", "list", "--probe", "all", "--json", home=tmp_path / "home", cwd=repo).stdout
    )["fleets"][0]
    assert listed["figures"] == "partly live" and listed["unreachable"] == ["n1"]
    assert listed["gpus"] == 8  # the two hosts that answered


def test_logs_of_a_unit_on_an_ssh_host(tmp_path: Path, ssh_lab: SshLab) -> None:
    server = ssh_lab.start("n0", namespaced=True)
    repo = _lab_repo(tmp_path, ssh_lab, [server.address])
    from reconciler.fleet.ssh import SshTransport
    from reconciler.spec.fleet import Host
    from tests.fleet.conftest import wait_for
    from tests.labs.sshd import ssh_settings

    agent = AgentClient(
        SshTransport(Host(name="n0", address=server.address, gpus=4), ssh_settings(ssh_lab)),
        python=sys.executable,
    )
    agent.launch({"id": "hello", "digest": "h", "argv": [sys.executable, "-c", "print('hi')"]})
    wait_for(lambda: agent.units()[0].exit_code == 0, what="the unit to finish")
    run = denv("fleet", "logs", "lab", "hello", home=tmp_path / "home", cwd=repo)
    assert run.returncode == 0, run.stderr
    assert run.stdout == "hi\n"
    missing = denv("fleet", "logs", "lab", "nope", home=tmp_path / "home", cwd=repo)
    assert missing.returncode == 1 and "no unit 'nope' on lab" in missing.stderr
    agent.stop("hello")


def _fleet_file(repo: Path, lab: SshLab, hosts: list[tuple[str, str, int]], timeout: float) -> None:
    lines = "\n".join(
        f"    - {{ name: {name}, address: {address}, port: {port}, gpus: 4 }}"
        for name, address, port in hosts
    )
    (repo / "fleets").mkdir(parents=True, exist_ok=True)
    (repo / "fleets" / "lab.yaml").write_text(
        "fleet:\n  name: lab\n  provider: test\n  hardware: h200\n  simulated: true\n"
        f"  transport: ssh\n  ssh: {{ user: root, key_file: {lab.client_key}, "
        f"known_hosts: {lab.known_hosts}, connect_timeout: {timeout} }}\n  hosts:\n{lines}\n"
    )


def _denv_files(repo: Path) -> Path:
    for folder in ("catalog", "recipes", "policies"):
        shutil.copytree(ROOT / folder, repo / folder)
    return repo


def test_hosts_not_reached_one_line_each_with_its_cause(
    tmp_path: Path, ssh_lab: SshLab, silent: SilentListener
) -> None:
    """A banner that never comes, a closed port, a key the host refuses, a host key that
    changed: one line each, with its cause; no library traceback; exit 1."""
    wrong_key = ssh_lab.start("wrong-key")
    (wrong_key.folder / "authorized_keys").write_text(keygen(ssh_lab.folder / "other") + "\n")
    moved = ssh_lab.start("moved")
    new_key = keygen(ssh_lab.folder / "moved-new-key").split()
    kept = [
        line
        for line in ssh_lab.known_hosts.read_text().splitlines()
        if not line.startswith(f"[{moved.address}]:{moved.port} ")
    ]
    kept.append(f"[{moved.address}]:{moved.port} {new_key[0]} {new_key[1]}")
    ssh_lab.known_hosts.write_text("\n".join(kept) + "\n")
    hosts = {
        "quiet": ("127.0.0.1", silent.port, "timed out"),
        "closed": ("127.0.0.1", free_port(), "refused"),
        "wrong-key": (wrong_key.address, wrong_key.port, "auth failed"),
        "moved": (moved.address, moved.port, "host key changed"),
    }
    repo = _denv_files(tmp_path / "repo")
    _fleet_file(repo, ssh_lab, [(name, a, port) for name, (a, port, _) in hosts.items()], timeout=2)

    run = denv("fleet", "list", "--probe", "all", home=tmp_path / "home", cwd=repo)
    assert run.returncode == 1
    assert run.stderr == ""  # paramiko's tracebacks are not shown without --debug
    reached = [line for line in run.stdout.splitlines() if "not reached" in line]
    assert len(reached) == len(hosts), run.stdout
    for name, (address, port, cause) in hosts.items():
        assert any(
            line.startswith(f"lab: {name} ({address}:{port}) not reached: {cause} — ")
            for line in reached
        ), (name, run.stdout)
    assert len(run.stdout.splitlines()) == 3 + len(hosts)  # the table, its note, one a host

    listed = json.loads(
        denv("fleet", "list", "--probe", "all", "--json", home=tmp_path / "home", cwd=repo).stdout
    )["fleets"][0]
    assert sorted(listed["errors"]) == sorted(hosts)

    probe = denv("fleet", "probe", "lab", home=tmp_path / "home", cwd=repo)
    assert probe.returncode == 1 and "Traceback" not in probe.stdout + probe.stderr

    debug = denv("--debug", "fleet", "list", "--probe", "all", home=tmp_path / "home", cwd=repo)
    assert debug.returncode == 1 and "paramiko" in debug.stderr  # the libraries' logs, asked for


def test_a_plan_and_a_deploy_name_the_hosts_not_reached_and_exit_1(
    tmp_path: Path, ssh_lab: SshLab, silent: SilentListener
) -> None:
    repo = _denv_files(tmp_path / "repo")
    _fleet_file(
        repo,
        ssh_lab,
        [("quiet", "127.0.0.1", silent.port), ("closed", "127.0.0.1", free_port())],
        timeout=1,
    )
    release = (ROOT / "releases" / "chat-8b" / "denv.yaml").read_text()
    (repo / "releases" / "chat").mkdir(parents=True)
    (repo / "releases" / "chat" / "denv.yaml").write_text(
        release.replace("fleets: [local]", "fleets: [lab]")
    )
    init_repo(repo)
    env = {"DENV_CACHE": str(tmp_path / "cache"), "XDG_STATE_HOME": str(tmp_path / "xdg")}

    plan = denv("plan", "--repo", str(repo), home=tmp_path / "home", cwd=repo, env=env)
    assert plan.returncode == 1
    assert "Traceback" not in plan.stdout + plan.stderr
    assert "left as it runs: no host of lab answered: closed (refused), quiet (timed out)" in (
        plan.stdout
    )
    assert "largest domain" not in plan.stdout
    assert "2 hosts not reached" in plan.stdout

    deploy = denv(
        "deploy",
        "--recipe",
        "llama-3.1-8b/vllm@1",
        "--target",
        "lab",
        "--name",
        "chat-lab",
        home=tmp_path / "home",
        cwd=repo,
        env=env,
    )
    assert deploy.returncode == 1, deploy.stdout + deploy.stderr
    assert "Traceback" not in deploy.stdout + deploy.stderr
    assert "check 'denv plan' failure: cannot be placed" in deploy.stdout
    assert "no host of lab answered: closed (refused), quiet (timed out)" in deploy.stdout
