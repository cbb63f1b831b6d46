"""Time from a commit to all replicas ready, for N replicas on a simulated local fleet: the
reconciler (`denv reconcile --once`) side by side with a hand-written launch script that
starts the same processes and polls their readiness.

    .venv/bin/python benchmarks/converge.py [--replicas 1,4,16] [--repeats 3] [--spare-gpus 1]
        [--timeout 300]

Each repeat gets a fresh workspace in a temp folder: a git repository of this one's catalog,
recipes and policies, one generated fleet (transport local, simulated, on a loopback address
of its own so that its ports meet nobody else's, with N + `--spare-gpus` GPUs) and one release
of N one-GPU replicas of `llama-3.1-8b/vllm@1` behind a router; DENV_HOME and DENV_CACHE
inside it. Measured:

- deploy: `denv reconcile --once` after the first commit, until it exits with every replica
  and the router ready (wall time, interpreter start included; "pass" is the bot's own figure);
- steady: the next `--once`, which finds nothing to do; its "pass" is what each pass of the
  loop costs once the bot runs;
- roll: a commit that changes max_batch, then `--once` until every replica runs the new spec
  (with a spare GPU each replace surges first; with none, it is in place);
- script: bash starting the same argv in the background, `curl` on each replica's readiness
  every 0.2 s (the bot's interval), then the router likewise.

Every unit is stopped and the folder removed after each repeat, also on failure or Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pygit2

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from reconciler.engines.units import Unit  # noqa: E402
from reconciler.fleet.drivers.registry import Drivers  # noqa: E402
from reconciler.fleet.hostagent import AgentClient  # noqa: E402
from reconciler.fleet.transport import LocalTransport  # noqa: E402
from reconciler.reconcile import probes  # noqa: E402
from reconciler.reconcile.snapshot import Snapshot, snapshot  # noqa: E402
from reconciler.reconcile.source import GitSource  # noqa: E402

COPIED = ("catalog", "recipes", "policies")
SIGNATURE = pygit2.Signature("denv bench", "bench@denv.invalid")
RELEASE = "releases/conv/denv.yaml"


class Workspace:
    """A denv repository in git with one local simulated fleet, and the bot's folders."""

    def __init__(self, replicas: int, spare: int, timeout: float) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="denv-converge."))
        self.repo = self.root / "repo"
        self.timeout = timeout
        # 127.0.0.0/8 is all loopback: an address of our own keeps ports 8000+ clear of the
        # demo and of tests that use 127.0.0.1.
        self.address = f"127.{random.randint(64, 254)}.{random.randint(0, 254)}.1"
        self.env = {
            **os.environ,
            "DENV_HOME": str(self.root / "home"),
            "DENV_CACHE": str(self.root / "cache"),
        }
        self.env.pop("DENV_REPO", None)
        for name in COPIED:
            shutil.copytree(ROOT / name, self.repo / name)
        self.write(
            "fleets/bench.yaml",
            "fleet:\n  name: bench\n  provider: local\n  hardware: h200\n  simulated: true\n"
            f"  transport: local\n  hosts:\n"
            f"    - {{ name: localhost, address: {self.address}, gpus: {replicas + spare} }}\n",
        )
        self.git = pygit2.init_repository(str(self.repo), initial_head="main")
        self.agent = AgentClient(LocalTransport(env=self.env), python=sys.executable)

    def write(self, relative: str, text: str) -> None:
        (self.repo / relative).parent.mkdir(parents=True, exist_ok=True)
        (self.repo / relative).write_text(text)

    def release(self, replicas: int, batch: int) -> None:
        """Write the release and commit it on main."""
        self.write(
            RELEASE,
            "release:\n  model: conv\n"
            "  weights: hf://meta-llama/Llama-3.1-8B-Instruct@0e9e39f249a16976918f6564b8830bc894c89659\n"
            "  recipe: llama-3.1-8b/vllm@1\n"
            f"  overrides:\n    settings: {{ max_batch: {batch} }}\n"
            f"  topology: {{ mode: aggregated, replicas: {replicas}, gpus: 1 }}\n"
            "stages:\n  - name: canary\n    fleets: [bench]\n",
        )
        index = self.git.index
        index.add_all()
        index.write()
        parents = [] if self.git.head_is_unborn else [self.git.head.target]
        tree = index.write_tree()
        self.git.create_commit("HEAD", SIGNATURE, SIGNATURE, f"max_batch {batch}", tree, parents)

    def look(self) -> Snapshot:
        """Desired, observed and the plan between them, as the bot would see them now."""
        drivers = Drivers(local_env=self.env)
        try:
            return snapshot(GitSource(str(self.repo), self.root / "cache"), drivers)
        finally:
            drivers.close()

    def reconcile(self) -> tuple[float, dict[str, Any]]:
        """Wall seconds of one `denv reconcile --once`, and its JSON pass line."""
        argv = [sys.executable, "-m", "reconciler", "reconcile", "--once", "--json"]
        argv += ["--repo", str(self.repo), "--ready-timeout", f"{self.timeout:g}s"]
        started = time.perf_counter()
        try:
            done = subprocess.run(
                argv, capture_output=True, text=True, env=self.env, timeout=self.timeout
            )
        except subprocess.TimeoutExpired as exc:
            said = exc.stderr.decode() if isinstance(exc.stderr, bytes) else exc.stderr or ""
            raise SystemExit(f"denv reconcile ran past {self.timeout:g}s:\n{said}") from None
        seconds = time.perf_counter() - started
        if done.returncode != 0:
            raise SystemExit(f"denv reconcile failed ({done.returncode}):\n{done.stderr}")
        answer: dict[str, Any] = json.loads(done.stdout)
        return seconds, answer

    def teardown(self) -> None:
        try:
            for unit in self.agent.units():
                self.agent.stop(unit.id, grace=2)
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


def units_of(snap: Snapshot) -> list[Unit]:
    return [u.unit for d in snap.desired.deployments for u in d.units]


def converged(ws: Workspace, replicas: int) -> None:
    """Nothing left to do, every unit ready, the router serving every replica."""
    snap = ws.look()
    units = units_of(snap)
    assert snap.plan.empty, snap.plan.counts
    assert len(units) == replicas + 1 and all(probes.is_ready(u) for u in units)
    [router] = [u for u in units if u.role == "router"]
    assert len(probes.router_workers(router) or {}) == replicas


def script_text(units: list[Unit], logs: Path) -> str:
    """The hand-written launch script: engines in the background, each polled until ready,
    then the router the same way."""
    lines = [
        "set -eu",
        'ready() { until curl -fs -o /dev/null --max-time 2 "$1"; do sleep 0.2; done; }',
    ]
    engines = [u for u in units if u.role != "router"]
    routers = [u for u in units if u.role == "router"]
    for batch in (engines, routers):
        for unit in batch:
            env = [f"{k}={v}" for k, v in unit.env.items()]
            command = shlex.join(["env", *env, *unit.argv]) if env else shlex.join(unit.argv)
            log = shlex.quote(str(logs / f"{unit.name}.log"))
            lines.append(f"{command} >{log} 2>&1 &")
        for unit in batch:
            assert unit.readiness is not None
            lines.append(f"ready {shlex.quote(f'{probes.base_url(unit)}{unit.readiness.path}')}")
    return "\n".join(lines) + "\n"


def listening(unit: Unit) -> bool:
    assert unit.port is not None
    try:
        with socket.create_connection((unit.address, unit.port), timeout=0.2):
            return True
    except OSError:
        return False


def wait(condition: Callable[[], bool], timeout: float, what: str) -> None:
    if not probes.wait_until(condition, timeout, interval=0.05):
        raise SystemExit(f"timed out after {timeout:g}s: {what}")


def run_script(units: list[Unit], ws: Workspace) -> float:
    """Wall seconds of the launch script; its processes are killed (as a group) after."""
    logs = ws.root / "script-logs"
    logs.mkdir()
    script = ws.root / "launch.sh"
    script.write_text(script_text(units, logs))
    started = time.perf_counter()
    process = subprocess.Popen(["bash", str(script)], env=ws.env, start_new_session=True)
    try:
        code = process.wait(timeout=ws.timeout)
        seconds = time.perf_counter() - started
        if code != 0:
            raise SystemExit(f"the launch script failed ({code}); logs in {logs}")
        assert all(probes.is_ready(u) for u in units)
        return seconds
    finally:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(process.pid, sig)
            except ProcessLookupError:
                break
            if probes.wait_until(lambda: not any(map(listening, units)), 10, interval=0.05):
                break
        process.wait(timeout=10)


def one_repeat(replicas: int, spare: int, timeout: float, script_first: bool) -> dict[str, float]:
    ws = Workspace(replicas, spare, timeout)
    try:
        ws.release(replicas, batch=128)
        units = units_of(ws.look())
        row: dict[str, float] = {}
        if script_first:
            row["script"] = run_script(units, ws)
        row["deploy"], first = ws.reconcile()
        row["pass"] = first["seconds"]
        assert first["done"].get("start") == replicas + 1, first
        converged(ws, replicas)
        row["steady"], steady = ws.reconcile()
        row["steady pass"] = steady["seconds"]
        assert steady["done"] == {}, steady
        before = {u.id: u.pid for u in ws.agent.units()}
        ws.release(replicas, batch=64)
        row["roll"], rolled = ws.reconcile()
        assert rolled["done"].get("replace") == replicas, rolled
        converged(ws, replicas)
        after = {u.id: u.pid for u in ws.agent.units()}
        assert sum(after[i] != before[i] for i in after) == replicas
        if not script_first:
            for unit in ws.agent.units():
                ws.agent.stop(unit.id, grace=2)
            wait(lambda: not any(map(listening, units)), 30, "the bot's units to exit")
            row["script"] = run_script(units, ws)
        return row
    finally:
        ws.teardown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicas", default="1,4,16")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--spare-gpus", type=int, default=1, help="GPUs beyond the replicas' (0: rolls in place)"
    )
    parser.add_argument("--timeout", type=float, default=300, help="seconds per step at most")
    args = parser.parse_args()
    print(
        f"Python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs, "
        f"load average {os.getloadavg()[0]:.1f}; {args.spare_gpus} spare GPU(s); "
        f"medians of {args.repeats} repeats"
    )
    print(
        f"{'replicas':>8} | {'deploy':>7} {'pass':>7} {'script':>7} {'÷':>5} | "
        f"{'steady':>7} {'pass':>7} | {'roll':>7} {'/replica':>8}"
    )
    for replicas in (int(n) for n in args.replicas.split(",")):
        rows = [
            one_repeat(replicas, args.spare_gpus, args.timeout, i % 2 == 1)
            for i in range(args.repeats)
        ]
        m = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
        print(
            f"{replicas:>8} | {m['deploy']:>6.2f}s {m['pass']:>6.2f}s {m['script']:>6.2f}s "
            f"{m['deploy'] / m['script']:>4.2f}× | {m['steady']:>6.2f}s "
            f"{m['steady pass']:>6.2f}s | {m['roll']:>6.2f}s {m['roll'] / replicas:>7.2f}s",
            flush=True,
        )


if __name__ == "__main__":
    main()
