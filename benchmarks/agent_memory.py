"""The bot's resident memory with N kept hosts: RSS after one observe pass over N real sshd on
loopback, the connections still open.

    .venv/bin/python benchmarks/agent_memory.py [--hosts 0,64,128] [--json]

The lab (the largest N of sshd, the agent installed on each, as in fleet_observe.py) is shared;
each point runs in a fresh Python process of its own, so the points are independent: it imports
what the bot imports, opens a driver, observes the first N hosts through the public driver API
(`Drivers().get(fleet).observe(None)`), keeps the connections, and reads its own VmRSS and
VmHWM (peak) from /proc/self/status. `per_host_mib` is (RSS at N - RSS at 0) / N, against the
0 point of the same run. `--json` prints one JSON list, an object per point: hosts, rss_mib,
per_host_mib (null at 0 or without a 0 point), peak_mib.
"""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from fleet_observe import fleet_of, install_agent  # noqa: E402

from reconciler.fleet.drivers.registry import Drivers  # noqa: E402
from tests.labs.sshd import SshLab  # noqa: E402


def status_mib(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024  # kB
    raise RuntimeError(f"no {field} in /proc/self/status")


def point(lab: dict[str, object]) -> dict[str, float]:
    """In the child: observe the first `hosts` of the lab, keep the connections, measure."""
    ports = [int(p) for p in lab["ports"]]  # type: ignore[attr-defined]
    drivers = Drivers()
    try:
        if ports:
            fleet = fleet_of(Path(str(lab["key"])), Path(str(lab["known_hosts"])), ports)
            seen = drivers.get(fleet).observe(None)
            if seen.errors or len(seen.hosts) != len(ports):
                raise RuntimeError(f"observe failed: {seen.errors}")
        gc.collect()
        return {"rss_mib": status_mib("VmRSS"), "peak_mib": status_mib("VmHWM")}
    finally:
        drivers.close()


def measure(lab: SshLab, ports: list[int], hosts: int) -> dict[str, float]:
    request = {"key": str(lab.client_key), "known_hosts": str(lab.known_hosts)}
    request["ports"] = ports[:hosts]  # type: ignore[assignment]
    done = subprocess.run(
        [sys.executable, __file__, "--point"],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the point at {hosts} hosts failed: {done.stderr[-2000:]}")
    figures: dict[str, float] = json.loads(done.stdout)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", default="0,64,128")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--point", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.point:  # the child: the lab on stdin, its figures on stdout
        print(json.dumps(point(json.loads(sys.stdin.read()))))
        return
    counts = [int(n) for n in args.hosts.split(",")]
    rows: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory(prefix="denv-mem-") as temp:
        lab = SshLab(Path(temp) / "lab", own_home=True)
        try:
            ports = [lab.start(f"h{i}").port for i in range(max(counts))]
            if ports:
                install_agent(fleet_of(lab.client_key, lab.known_hosts, ports))
            figures = {count: measure(lab, ports, count) for count in counts}
        finally:
            lab.stop()
    base = figures.get(0)
    for count in counts:
        rss = figures[count]["rss_mib"]
        per_host = (rss - base["rss_mib"]) / count if base and count else None
        rows.append(
            {
                "hosts": count,
                "rss_mib": round(rss, 1),
                "per_host_mib": round(per_host, 3) if per_host is not None else None,
                "peak_mib": round(figures[count]["peak_mib"], 1),
            }
        )
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print("hosts | rss_mib | per_host_mib | peak_mib")
    for row in rows:
        print(" | ".join("-" if v is None else str(v) for v in row.values()))


if __name__ == "__main__":
    main()
