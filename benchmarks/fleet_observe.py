"""Time to observe N hosts: denv's agent (new and kept connections) against its peers over the
same N real sshd on loopback, in the same run.

    .venv/bin/python benchmarks/fleet_observe.py [--hosts 8,64,128] [--repeats 3] [--json]
        [--peers agent_new,agent_kept,ssh_controlmaster,ssh_per_fact,ansible,ansible_warm,
                 mitogen,mitogen_warm]

The peers, each over all N hosts in parallel, cold (new connections) and warm (connections
kept from a run before), so that cold is compared with cold and warm with warm:
- agent_new / agent_kept: denv's driver, `Drivers().get(fleet).observe(None)`, on new SSH
  connections (cold) / on connections kept from a pass before (warm) (the public driver API, so
  whatever the agent becomes, this times it);
- ssh_controlmaster: the floor, one bare `ssh host true` per host over kept OpenSSH connections
  (a ControlMaster per host, opened before timing);
- ssh_per_fact: the agent's facts gathered by one `ssh` command each (five per host);
- ansible: `ansible all -m command` ad hoc running the agent's probe on every host, cold: new
  connections (`ControlMaster=no`), no pipelining;
- ansible_warm: the same run again right after one untimed run, with Ansible's own documented
  best for repeated runs: its default `ssh_args` (`-C -o ControlMaster=auto -o
  ControlPersist=60s`, so the second run reuses the first's connections) and
  `pipelining = True` (a module's code sent over the connection, not copied to a file first);
- mitogen / mitogen_warm: the same two with Ansible's strategy set to mitogen_linear.

Setup, before any peer is timed, so their order does not matter and a fresh machine works:
the lab's sshd (each host with its own DENV_HOME, and its own HOME so that the login shell
does not read this machine's ~/.bashrc, a pyenv init of 150 ms per command), denv's agent
installed on every host (as the agent client installs it), the ControlMasters, and the Ansible
inventory. ansible-core and mitogen (pinned, a pair mitogen supports) go into their own venv,
benchmarks/.venv-ansible, on first use. Everything started is stopped at the end.

`--json` prints one JSON list, an object per hosts point, with medians in seconds: hosts,
agent_new_s, agent_kept_s, ssh_controlmaster_s, ansible_s, ansible_warm_s, mitogen_s,
mitogen_warm_s (and ssh_per_fact_s); a peer left out by --peers is null.
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
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from reconciler.fleet.drivers.agent import simulated_gpus  # noqa: E402
from reconciler.fleet.drivers.registry import Drivers  # noqa: E402
from reconciler.fleet.drivers.ssh import SshDriver  # noqa: E402
from reconciler.fleet.hostagent import AgentClient, agent_source  # noqa: E402
from reconciler.spec.fleet import Fleet, Host, SshSettings  # noqa: E402
from tests.labs.sshd import SshLab  # noqa: E402

ANSIBLE_VENV = ROOT / "benchmarks" / ".venv-ansible"
# mitogen 0.3.5x supports ansible-core up to 2.21 (its release notes); 2.19 is the newest
# ansible-core that installs on Python 3.11, this machine's Python.
ANSIBLE_PINS = ("ansible-core==2.19.14", "mitogen==0.3.54")
PEERS = (
    "agent_new", "agent_kept", "ssh_controlmaster", "ssh_per_fact",
    "ansible", "ansible_warm", "mitogen", "mitogen_warm",
)  # fmt: skip
FACT_COMMANDS = [  # what the agent's probe gathers, one command each
    "hostname",
    "nvidia-smi --query-gpu=index,uuid,name,memory.total,memory.used --format=csv || true",
    "nvidia-smi --query-compute-apps=gpu_uuid,pid,used_memory --format=csv || true",
    'cat "${DENV_HOME:-$HOME/.denv}"/units/*.json 2>/dev/null || true',
    "cat /proc/uptime",
]


def ansible_venv() -> Path:
    """The venv's bin folder, with the pinned ansible-core and mitogen installed."""
    stamp = ANSIBLE_VENV / "denv-pins.txt"
    if not stamp.exists() or stamp.read_text() != "\n".join(ANSIBLE_PINS):
        subprocess.run([sys.executable, "-m", "venv", str(ANSIBLE_VENV)], check=True)
        pip = [str(ANSIBLE_VENV / "bin" / "pip"), "install", "-q", *ANSIBLE_PINS]
        subprocess.run(pip, check=True)
        stamp.write_text("\n".join(ANSIBLE_PINS))
    return ANSIBLE_VENV / "bin"


def mitogen_strategies() -> Path:
    found = sorted(ANSIBLE_VENV.glob("lib/python*/site-packages/ansible_mitogen/plugins/strategy"))
    if not found:
        raise RuntimeError(f"mitogen is not installed in {ANSIBLE_VENV}")
    return found[0]


# --- the lab --------------------------------------------------------------------------------


def fleet_of(client_key: Path, known_hosts: Path, ports: list[int]) -> Fleet:
    settings = SshSettings(user="root", key_file=str(client_key), known_hosts=str(known_hosts))
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


def install_agent(fleet: Fleet) -> None:
    """Put denv's agent on every host, where and as the agent client puts it on first use."""
    source, digest = agent_source()
    driver = SshDriver(fleet)

    def install(host: Host) -> None:
        transport = driver.dial(host)
        try:
            AgentClient(transport, python=fleet.python)._install(source, digest, timeout=60)
        finally:
            transport.close()

    with ThreadPoolExecutor(max_workers=min(32, len(fleet.hosts))) as pool:
        list(pool.map(install, fleet.hosts))


def agent_path(lab: SshLab, host: str) -> Path:
    """Where the agent is on `host`: its DENV_HOME (the lab's sshd sets one per host)."""
    _, digest = agent_source()
    server = next(s for s in lab.servers if s.name == host)
    return server.folder / "denv-home" / "agent" / f"{digest}.pyz"


def simulated(fleet: Fleet, host: Host) -> str:
    """The probe's --simulated argument, as denv's driver passes it: the host's GPUs."""
    return json.dumps(simulated_gpus(fleet, host, None))


def ssh_argv(lab: SshLab, port: int, command: str, socket: Path | None = None) -> list[str]:
    kept = ["-S", str(socket)] if socket else []
    return [
        "ssh",
        "-q",
        *kept,
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


def control_socket(lab: SshLab, port: int) -> Path:
    return lab.folder / f"cm-{port}"


def open_masters(lab: SshLab, ports: list[int]) -> None:
    """One OpenSSH ControlMaster per host, left running (ControlPersist) for the floor."""

    def master(port: int) -> None:
        socket = control_socket(lab, port)
        argv = ssh_argv(lab, port, "true", socket)
        argv[2:2] = ["-M", "-o", "ControlPersist=yes"]
        # the master stays in the background holding whatever it was given: no pipes
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        check = ssh_argv(lab, port, "", socket)[:-1]
        check[2:2] = ["-O", "check"]
        subprocess.run(check, capture_output=True, check=True)

    with ThreadPoolExecutor(max_workers=min(32, len(ports))) as pool:
        list(pool.map(master, ports))


def close_masters(lab: SshLab, ports: list[int]) -> None:
    for port in ports:
        socket = control_socket(lab, port)
        if socket.exists():
            argv = ssh_argv(lab, port, "", socket)[:-1]
            argv[2:2] = ["-O", "exit"]
            subprocess.run(argv, capture_output=True, check=False)


def write_inventory(lab: SshLab, fleet: Fleet, ports: list[int], path: Path) -> None:
    """A YAML inventory (written as JSON): each host's port, agent and simulated GPUs."""
    hosts = {
        host.name: {
            "ansible_host": "127.0.0.1",
            "ansible_port": port,
            "agent": str(agent_path(lab, host.name)),
            "simulated": simulated(fleet, host),
        }
        for host, port in zip(fleet.hosts, ports, strict=True)
    }
    path.write_text(json.dumps({"all": {"hosts": hosts}}, indent=1))


# --- the peers ------------------------------------------------------------------------------


def time_agent(fleet: Fleet, kept: bool) -> float:
    drivers = Drivers()
    try:
        if kept:
            seen = drivers.get(fleet).observe(None)  # connections open
            assert not seen.errors, seen.errors
        started = time.perf_counter()
        seen = drivers.get(fleet).observe(None)
        elapsed = time.perf_counter() - started
        assert not seen.errors, seen.errors
        assert len(seen.hosts) == len(fleet.hosts)
        return elapsed
    finally:
        drivers.close()


def in_parallel(run: Callable[[int], None], ports: list[int]) -> float:
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=len(ports)) as pool:
        list(pool.map(run, ports))
    return time.perf_counter() - started


def time_controlmaster(lab: SshLab, ports: list[int]) -> float:
    def host(port: int) -> None:
        argv = ssh_argv(lab, port, "true", control_socket(lab, port))
        subprocess.run(argv, capture_output=True, check=True)

    return in_parallel(host, ports)


def time_ssh_per_fact(lab: SshLab, ports: list[int]) -> float:
    def host(port: int) -> None:
        for command in FACT_COMMANDS:
            subprocess.run(ssh_argv(lab, port, command), capture_output=True, check=True)

    return in_parallel(host, ports)


def time_ansible(
    lab: SshLab, inventory: Path, hosts: int, mitogen: bool, warm: bool = False
) -> float:
    """One ad hoc run timed: cold on new connections; warm right after an untimed run, its
    connections kept by Ansible's default ControlPersist, with pipelining."""
    folder = inventory.parent
    # cold: no ControlMaster; warm: Ansible's default ssh_args (ControlPersist=60s)
    reuse = "-C -o ControlMaster=auto -o ControlPersist=60s" if warm else "-o ControlMaster=no"
    env = {
        **os.environ,
        "ANSIBLE_HOST_KEY_CHECKING": "True",
        "ANSIBLE_SSH_ARGS": f"{reuse} -o UserKnownHostsFile={lab.known_hosts} "
        "-o KexAlgorithms=curve25519-sha256",
        "ANSIBLE_PIPELINING": "True" if warm else "False",
        # a folder per run: a warm run finds its own first run's sockets, a cold one none
        "ANSIBLE_SSH_CONTROL_PATH_DIR": str(folder / f"cp-{time.monotonic_ns()}"),
        "ANSIBLE_PYTHON_INTERPRETER": sys.executable,
        "ANSIBLE_FORKS": str(hosts),
        "ANSIBLE_LOCAL_TEMP": str(folder / "ansible-local"),
        "ANSIBLE_REMOTE_TEMP": str(folder / "ansible-remote"),
        "ANSIBLE_INVENTORY_ENABLED": "yaml",
        # connecting 128 hosts at once on 2 cores takes longer than the default 10 s
        "ANSIBLE_TIMEOUT": "60",
    }
    if mitogen:  # an ad hoc run's play takes the default strategy: ANSIBLE_STRATEGY
        env["ANSIBLE_STRATEGY_PLUGINS"] = str(mitogen_strategies())
        env["ANSIBLE_STRATEGY"] = "mitogen_linear"
    argv = [
        str(ansible_venv() / "ansible"),
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
        # the probe as the driver runs it (an -a that starts with "{" would be read as JSON)
        f"{sys.executable} {{{{ agent }}}} probe --simulated {{{{ simulated | quote }}}}",
    ]
    if warm:
        _checked(subprocess.run(argv, capture_output=True, text=True, env=env), hosts, mitogen)
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    elapsed = time.perf_counter() - started
    _checked(done, hosts, mitogen)
    return elapsed


def _checked(done: subprocess.CompletedProcess[str], hosts: int, mitogen: bool) -> None:
    """Every host's probe answered, or the run's failure named."""
    answered = done.stdout.count('"ok": true')
    if done.returncode != 0 or answered != hosts:
        failed = [line for line in done.stdout.splitlines() if not line.startswith('{"ok": true')]
        raise RuntimeError(
            f"ansible ({'mitogen' if mitogen else 'ssh'}): exit {done.returncode}, "
            f"{answered} of {hosts} probes answered\n"
            + "\n".join(line[:500] for line in failed[-40:])
            + done.stderr[-2000:]
        )


# --- a run ----------------------------------------------------------------------------------


def measure(folder: Path, count: int, repeats: int, peers: list[str]) -> dict[str, object]:
    lab = SshLab(folder / f"lab{count}", own_home=True)
    ports: list[int] = []
    try:
        ports = [lab.start(f"h{i}").port for i in range(count)]
        fleet = fleet_of(lab.client_key, lab.known_hosts, ports)
        install_agent(fleet)
        if "ssh_controlmaster" in peers:
            open_masters(lab, ports)
        inventory = lab.folder / "inventory.yml"
        write_inventory(lab, fleet, ports, inventory)
        timers: dict[str, Callable[[], float]] = {
            "agent_new": lambda: time_agent(fleet, kept=False),
            "agent_kept": lambda: time_agent(fleet, kept=True),
            "ssh_controlmaster": lambda: time_controlmaster(lab, ports),
            "ssh_per_fact": lambda: time_ssh_per_fact(lab, ports),
            "ansible": lambda: time_ansible(lab, inventory, count, mitogen=False),
            "ansible_warm": lambda: time_ansible(lab, inventory, count, False, warm=True),
            "mitogen": lambda: time_ansible(lab, inventory, count, mitogen=True),
            "mitogen_warm": lambda: time_ansible(lab, inventory, count, True, warm=True),
        }
        figures: dict[str, list[float]] = {peer: [] for peer in peers}
        for _ in range(repeats):
            for peer in peers:
                figures[peer].append(timers[peer]())
        row: dict[str, object] = {"hosts": count}
        for peer in PEERS:
            row[f"{peer}_s"] = round(statistics.median(figures[peer]), 3) if peer in peers else None
        row["repeats"] = repeats
        return row
    finally:
        close_masters(lab, ports)
        lab.stop()


def ratio(row: dict[str, object], top: str, bottom: str) -> str:
    a, b = row.get(top), row.get(bottom)
    if not isinstance(a, float) or not isinstance(b, float) or b == 0:
        return "-"
    return f"{a / b:.1f}x"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", default="8,64,128")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--peers", default=",".join(PEERS), help="a comma list of: " + ", ".join(PEERS)
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    peers = [p for p in args.peers.split(",") if p]
    unknown = sorted(set(peers) - set(PEERS))
    if unknown:
        parser.error(f"unknown peers {', '.join(unknown)}; known: {', '.join(PEERS)}")
    if {"ansible", "ansible_warm", "mitogen", "mitogen_warm"} & set(peers):
        ansible_venv()
    rows = []
    with tempfile.TemporaryDirectory(prefix="denv-obs-") as temp:
        for count in [int(n) for n in args.hosts.split(",")]:
            rows.append(measure(Path(temp), count, args.repeats, peers))
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)  # progress
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    columns = ["hosts", *(f"{p}_s" for p in PEERS)]
    ratios = [  # cold with cold, warm with warm
        ("agent_kept / floor", "agent_kept_s", "ssh_controlmaster_s"),
        ("ansible / agent_new", "ansible_s", "agent_new_s"),
        ("mitogen / agent_new", "mitogen_s", "agent_new_s"),
        ("ansible_warm / agent_kept", "ansible_warm_s", "agent_kept_s"),
        ("mitogen_warm / agent_kept", "mitogen_warm_s", "agent_kept_s"),
    ]
    print(" | ".join(columns + [name for name, _, _ in ratios]))
    for row in rows:
        cells = ["-" if row[k] is None else str(row[k]) for k in columns]
        print(" | ".join(cells + [ratio(row, top, bottom) for _, top, bottom in ratios]))


if __name__ == "__main__":
    main()
