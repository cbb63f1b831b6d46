"""Time to observe N hosts: denv's agent (one round trip per host) against the same facts
gathered by one `ssh` command per fact, and against `ansible -m command` ad hoc.

    .venv/bin/python benchmarks/fleet_observe.py [--hosts 8,32,64] [--repeats 3]

Starts N real sshd on loopback (as root, like the tests), runs each tool over the same hosts
in the same run, and prints medians and ratios. ansible-core is installed into its own venv
(benchmarks/.venv-ansible) on first use. Everything it starts is stopped at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from reconciler.fleet.drivers.registry import Drivers  # noqa: E402
from reconciler.fleet.hostagent import agent_source  # noqa: E402
from reconciler.spec.fleet import Fleet, Host, SshSettings  # noqa: E402
from tests.fleet.sshd import SshLab  # noqa: E402

ANSIBLE_VENV = ROOT / "benchmarks" / ".venv-ansible"
FACT_COMMANDS = [  # what the agent's probe gathers, one command each
    "hostname",
    "nvidia-smi --query-gpu=index,uuid,name,memory.total,memory.used --format=csv || true",
    "nvidia-smi --query-compute-apps=gpu_uuid,pid,used_memory --format=csv || true",
    "cat ~/.denv/units/*.json 2>/dev/null || true",
    "cat /proc/uptime",
]


def ansible() -> Path:
    binary = ANSIBLE_VENV / "bin" / "ansible"
    if not binary.exists():
        subprocess.run([sys.executable, "-m", "venv", str(ANSIBLE_VENV)], check=True)
        subprocess.run(
            [str(ANSIBLE_VENV / "bin" / "pip"), "install", "-q", "ansible-core"], check=True
        )
    return binary


def fleet_of(lab: SshLab, ports: list[int]) -> Fleet:
    settings = SshSettings(
        user="root", key_file=str(lab.client_key), known_hosts=str(lab.known_hosts)
    )
    hosts = [
        Host(name=f"h{i}", address="127.0.0.1", port=port, gpus=8) for i, port in enumerate(ports)
    ]
    return Fleet(
        name="bench",
        provider="local",
        hardware="h200",
        simulated=True,
        transport="ssh",
        ssh=settings,
        python=sys.executable,  # the agent runs with this interpreter, as the bot's tests do
        hosts=hosts,
    )


def time_agent(lab: SshLab, ports: list[int], warm: bool) -> float:
    fleet = fleet_of(lab, ports)
    drivers = Drivers()
    try:
        if warm:
            drivers.get(fleet).observe(None)  # connections open, agent cached
        started = time.perf_counter()
        seen = drivers.get(fleet).observe(None)
        elapsed = time.perf_counter() - started
        assert not seen.errors, seen.errors
        return elapsed
    finally:
        drivers.close()


def ssh_argv(lab: SshLab, port: int, command: str) -> list[str]:
    return [
        "ssh",
        "-q",
        "-i",
        str(lab.client_key),
        "-p",
        str(port),
        "-o",
        "BatchMode=yes",
        "-o",
        f"UserKnownHostsFile={lab.known_hosts}",
        "-o",
        "StrictHostKeyChecking=yes",
        "-o",
        "KexAlgorithms=curve25519-sha256",
        "root@127.0.0.1",
        command,
    ]


def time_ssh_per_fact(lab: SshLab, ports: list[int]) -> float:
    def host(port: int) -> None:
        for command in FACT_COMMANDS:
            subprocess.run(ssh_argv(lab, port, command), capture_output=True, check=True)

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=len(ports)) as pool:
        list(pool.map(host, ports))
    return time.perf_counter() - started


def time_ansible(lab: SshLab, ports: list[int], folder: Path) -> float:
    inventory = folder / "inventory.ini"
    inventory.write_text(
        "[all]\n"
        + "".join(
            f"h{i} ansible_host=127.0.0.1 ansible_port={port}\n" for i, port in enumerate(ports)
        )
    )
    _, digest = agent_source()
    agent = f"~/.denv/agent/{digest}.py"
    env = {
        **os.environ,
        "ANSIBLE_HOST_KEY_CHECKING": "True",
        "ANSIBLE_SSH_ARGS": f"-o UserKnownHostsFile={lab.known_hosts} "
        "-o KexAlgorithms=curve25519-sha256",
        "ANSIBLE_PYTHON_INTERPRETER": sys.executable,
        "ANSIBLE_FORKS": str(len(ports)),
        "ANSIBLE_LOCAL_TEMP": str(folder / "ansible-local"),
        "ANSIBLE_REMOTE_TEMP": str(folder / "ansible-remote"),
    }
    argv = [
        str(ansible()),
        "all",
        "-i",
        str(inventory),
        "-u",
        "root",
        "--private-key",
        str(lab.client_key),
        "-m",
        "command",
        "-a",
        f"{sys.executable} {agent} probe",
    ]
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(done.stdout[-2000:] + done.stderr[-2000:])
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", default="8,32,64")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    ansible()
    rows = []
    with tempfile.TemporaryDirectory() as temp:
        folder = Path(temp)
        for count in [int(n) for n in args.hosts.split(",")]:
            lab = SshLab(folder / f"lab{count}")
            try:
                ports = [lab.start(f"h{i}").port for i in range(count)]
                fleet = fleet_of(lab, ports)
                Drivers().get(fleet).units(
                    fleet.hosts[0].name
                )  # installs the agent (all hosts share this machine's home)
                figures: dict[str, list[float]] = {
                    "agent cold": [],
                    "agent warm": [],
                    "ssh per fact": [],
                    "ansible": [],
                }
                for _ in range(args.repeats):
                    figures["agent cold"].append(time_agent(lab, ports, warm=False))
                    figures["agent warm"].append(time_agent(lab, ports, warm=True))
                    figures["ssh per fact"].append(time_ssh_per_fact(lab, ports))
                    figures["ansible"].append(time_ansible(lab, ports, folder))
                medians = {k: statistics.median(v) for k, v in figures.items()}
                rows.append(
                    {
                        "hosts": count,
                        **{k: round(v, 3) for k, v in medians.items()},
                        "ansible / agent cold": round(
                            medians["ansible"] / medians["agent cold"], 1
                        ),
                        "ssh per fact / agent cold": round(
                            medians["ssh per fact"] / medians["agent cold"], 1
                        ),
                        "agent cold / agent warm": round(
                            medians["agent cold"] / medians["agent warm"], 1
                        ),
                    }
                )
            finally:
                lab.stop()
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    keys = list(rows[0])
    print(" | ".join(keys))
    for row in rows:
        print(" | ".join(str(row[k]) for k in keys))


if __name__ == "__main__":
    main()
