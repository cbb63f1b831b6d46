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
from tests.fleet.sshd import SshLab


def denv(*args: str, home: Path, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DENV_HOME": str(home)}
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
    assert list(seen["errors"]) == ["n1"] and "unreachable" in seen["errors"]["n1"]
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
    from tests.fleet.conftest import ssh_settings, wait_for

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
