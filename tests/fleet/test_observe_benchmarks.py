"""The fleet benchmarks, lab-sized, over real sshd: benchmarks/fleet_observe.py sets every peer
up before timing any (a fresh lab has no agent on its hosts), and both it and
benchmarks/agent_memory.py print the JSON points a script checks."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

from tests.conftest import ROOT
from tests.labs.sshd import SshLab


def fleet_observe() -> ModuleType:
    path = ROOT / "benchmarks" / "fleet_observe.py"
    spec = importlib.util.spec_from_file_location("fleet_observe_bench", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_on_a_fresh_lab_the_ansible_peers_probe_finds_the_agent(tmp_path: Path) -> None:
    bench = fleet_observe()
    lab = SshLab(tmp_path / "lab", own_home=True)
    try:
        ports = [lab.start(f"h{i}").port for i in range(2)]
        fleet = bench.fleet_of(lab.client_key, lab.known_hosts, ports)
        bench.install_agent(fleet)  # before any peer, denv's driver included, ran
        inventory = tmp_path / "inventory.yml"
        bench.write_inventory(lab, fleet, ports, inventory)
        hosts = json.loads(inventory.read_text())["all"]["hosts"]
        for host, port in zip(fleet.hosts, ports, strict=True):
            vars_ = hosts[host.name]
            # what the ansible peers run on the host, here over plain ssh
            command = f"{fleet.python} {vars_['agent']} probe --simulated '{vars_['simulated']}'"
            done = subprocess.run(
                bench.ssh_argv(lab, port, command), capture_output=True, text=True, check=False
            )
            assert done.returncode == 0, done.stderr
            answer = json.loads(done.stdout.strip().splitlines()[-1])
            assert answer["ok"] and len(answer["result"]["gpus"]) == 8
            assert answer["result"]["home"] == str(
                lab.servers[fleet.hosts.index(host)].folder / "denv-home"
            )
    finally:
        lab.stop()


def test_a_lab_host_of_its_own_home_does_not_read_this_machines_shell_rc(tmp_path: Path) -> None:
    lab = SshLab(tmp_path / "lab", own_home=True)
    try:
        server = lab.start("h0")
        argv = fleet_observe().ssh_argv(lab, server.port, "echo $HOME")
        done = subprocess.run(argv, capture_output=True, text=True, check=True)
        assert done.stdout.strip() == str(server.folder)
    finally:
        lab.stop()


def run_json(*argv: str) -> list[dict[str, object]]:
    done = subprocess.run(
        [sys.executable, *argv, "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    rows: list[dict[str, object]] = json.loads(done.stdout)
    return rows


def test_fleet_observe_prints_a_point_per_hosts_count_with_the_peers_asked() -> None:
    peers = "ssh_controlmaster,agent_kept,agent_new"  # the ones without ansible's venv
    rows = run_json(
        "benchmarks/fleet_observe.py", "--hosts", "2", "--repeats", "1", "--peers", peers
    )
    (row,) = rows
    keys = {"hosts", "agent_new_s", "agent_kept_s", "ssh_controlmaster_s", "ansible_s", "mitogen_s"}
    assert keys <= set(row)
    assert row["hosts"] == 2
    for peer in ("agent_new_s", "agent_kept_s", "ssh_controlmaster_s"):
        assert isinstance(row[peer], float) and row[peer] > 0
    assert row["ansible_s"] is None and row["mitogen_s"] is None  # not asked


def test_agent_memory_prints_rss_per_point_and_per_kept_host() -> None:
    rows = run_json("benchmarks/agent_memory.py", "--hosts", "0,2")
    assert [row["hosts"] for row in rows] == [0, 2]
    for row in rows:
        assert isinstance(row["rss_mib"], float) and row["rss_mib"] > 0
    assert rows[0]["per_host_mib"] is None
    assert isinstance(rows[1]["per_host_mib"], float)
