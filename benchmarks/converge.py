"""Time from a commit to all replicas ready, for N replicas on a simulated local fleet: the
reconciler (`denv reconcile --once`) side by side with a hand-written launch script that
starts the same processes and polls their readiness.

    .venv/bin/python benchmarks/converge.py [--replicas 1,4,16] [--repeats 3]
        [--deployments 1] [--spare-gpus 1] [--timeout SECONDS] [--json]

Each repeat gets a fresh workspace in a temp folder: a git repository of this one's catalog,
recipes and policies, one generated fleet (transport local, simulated, one host on a loopback
address of its own so that its ports meet nobody else's, with N + K × `--spare-gpus` GPUs) and
K = `--deployments` releases of N/K one-GPU replicas of `llama-3.1-8b/vllm@1`, each behind
its own router; DENV_HOME and DENV_CACHE inside it. The benchmark reads each commit (the plan
the script takes its argv from) through the bot's own clone and parse cache in DENV_CACHE, as
the plan a pull request gets before its merge does on the bot's machine: the bot's deploy
finds them warm. Measured:

- deploy: `denv reconcile --once` after the first commit, until it exits with every replica
  and every router ready (wall time, interpreter start included; "pass" is the bot's own
  figure; "apply" is the part of it from the decision — the plan the pass acts on, after
  reading git, observing and taking the lease — until every replica serves, which is what
  adding replicas costs a running bot);
- steady: the next `--once`, which finds nothing to do; its "pass" is what each pass of the
  loop costs once the bot runs;
- roll: one commit that changes max_batch in every release, then `--once` until every replica
  runs the new spec (with a spare GPU per deployment each replace surges first, one replica at
  a time inside a deployment, deployments side by side as far as apply runs them so; with
  none, it is in place);
- script: bash starting the same argv in the background, `curl` on each replica's readiness
  every 0.2 s (the bot's interval), then the routers likewise, then each router's worker
  list every 0.05 s (as the bot polls it) until it lists all its replicas: the state the
  bot's deploy ends in (a router's readiness passes once it has one).

`--json` prints one JSON list, an object per replicas point: `replicas`, `deploy_s`,
`script_s` (medians, seconds), and `deployments`, `spare_gpus`, `ratio` (deploy ÷ script),
`pass_s`, `apply_s`, `apply_ratio` (apply ÷ script), `steady_s`, `steady_pass_s`, `roll_s`,
`roll_per_replica_s`, `repeats` and the 1-minute load average before and after the point
(`load_before`, `load_after`).

Every unit is stopped and the folder removed after each repeat, also on failure, Ctrl-C or
SIGTERM; a unit that will not stop is named, and its folder kept.
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
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

import pygit2

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from reconciler.engines.units import Unit  # noqa: E402
from reconciler.errors import DenvError  # noqa: E402
from reconciler.fleet.drivers.registry import Drivers  # noqa: E402
from reconciler.fleet.hostagent import AgentClient  # noqa: E402
from reconciler.fleet.model.observed import UnitRecord  # noqa: E402
from reconciler.fleet.transport import LocalTransport  # noqa: E402
from reconciler.reconcile import probes  # noqa: E402
from reconciler.reconcile.snapshot import Snapshot, snapshot  # noqa: E402
from reconciler.reconcile.source import GitSource  # noqa: E402

COPIED = ("catalog", "recipes", "policies")
SIGNATURE = pygit2.Signature("denv bench", "bench@denv.invalid")
STOPPERS = 4  # agent calls at once when stopping every unit


def release_names(deployments: int) -> list[str]:
    """One release per deployment: `conv`, or `conv-1` … `conv-K`."""
    return ["conv"] if deployments == 1 else [f"conv-{i}" for i in range(1, deployments + 1)]


def fleet_text(gpus: int, address: str) -> str:
    """The bench fleet: one host of `gpus` simulated H200s at `address`. One host, not hosts of
    8: the hosts of a local fleet are this machine under one agent home (DENV_HOME), so each
    would report every unit as its own."""
    return (
        "fleet:\n  name: bench\n  provider: local\n  hardware: h200\n  simulated: true\n"
        "  transport: local\n  hosts:\n"
        f"    - {{ name: localhost, address: {address}, gpus: {gpus} }}\n"
    )


def release_text(model: str, replicas: int, batch: int) -> str:
    return (
        f"release:\n  model: {model}\n"
        "  weights: hf://meta-llama/Llama-3.1-8B-Instruct@0e9e39f249a16976918f6564b8830bc894c89659\n"
        "  recipe: llama-3.1-8b/vllm@1\n"
        f"  overrides:\n    settings: {{ max_batch: {batch} }}\n"
        f"  topology: {{ mode: aggregated, replicas: {replicas}, gpus: 1 }}\n"
        "stages:\n  - name: canary\n    fleets: [bench]\n"
    )


class Workspace:
    """A denv repository in git with one local simulated fleet, and the bot's folders."""

    def __init__(self, replicas: int, deployments: int, spare: int, timeout: float) -> None:
        if replicas % deployments:
            raise SystemExit(f"{replicas} replicas do not split into {deployments} deployments")
        self.replicas = replicas
        self.names = release_names(deployments)
        self.root = Path(tempfile.mkdtemp(prefix="denv-converge."))
        self.repo = self.root / "repo"
        self.timeout = timeout
        # 127.0.0.0/8 is all loopback: an address of our own keeps ports 8000+ clear of the
        # demo and of tests that use 127.0.0.1.
        self.address = f"127.{random.randint(64, 254)}.{random.randint(0, 254)}.1"
        path = os.environ.get("PYTHONPATH")
        self.env = {
            **os.environ,
            "DENV_HOME": str(self.root / "home"),
            "DENV_CACHE": str(self.root / "cache"),
            # the bot, its agent and the simulators run this tree's denv, from any folder
            "PYTHONPATH": f"{ROOT}{os.pathsep}{path}" if path else str(ROOT),
        }
        self.env.pop("DENV_REPO", None)
        for name in COPIED:
            shutil.copytree(ROOT / name, self.repo / name)
        self.write("fleets/bench.yaml", fleet_text(replicas + spare * deployments, self.address))
        self.git = pygit2.init_repository(str(self.repo), initial_head="main")
        self.agent = AgentClient(LocalTransport(env=self.env), python=sys.executable)

    def write(self, relative: str, text: str) -> None:
        (self.repo / relative).parent.mkdir(parents=True, exist_ok=True)
        (self.repo / relative).write_text(text)

    def release(self, batch: int) -> None:
        """Write every release (N/K replicas each) and commit them on main."""
        each = self.replicas // len(self.names)
        for name in self.names:
            self.write(f"releases/{name}/denv.yaml", release_text(name, each, batch))
        index = self.git.index
        index.add_all()
        index.write()
        parents = [] if self.git.head_is_unborn else [self.git.head.target]
        tree = index.write_tree()
        self.git.create_commit("HEAD", SIGNATURE, SIGNATURE, f"max_batch {batch}", tree, parents)

    def look(self) -> Snapshot:
        """Desired, observed and the plan between them, as the bot would see them now; read
        through the bot's clone and parse cache (`cli.plan.cache_dir` under DENV_CACHE)."""
        drivers = Drivers(local_env=self.env)
        try:
            return snapshot(GitSource(str(self.repo), self.root / "cache" / "repos"), drivers)
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

    def stop_all(self) -> list[str]:
        """Stop every unit the agent knows, a few at once; what could not be stopped."""
        left: list[str] = []

        def stop(unit: UnitRecord) -> None:
            try:
                self.agent.stop(unit.id, grace=2)
            except DenvError as exc:  # every other unit is stopped all the same
                left.append(f"{unit.id} (pid {unit.pid}): {exc}")

        with ThreadPoolExecutor(max_workers=STOPPERS) as pool:
            list(pool.map(stop, self.agent.units()))
        return left

    def teardown(self) -> None:
        """Every unit stopped, then the folder removed; kept (and said) if a unit would not stop
        or the agent could not list them, so that nothing runs on without its records."""
        try:
            left = self.stop_all()
        except DenvError as exc:  # said, with where the records are
            left = [f"the agent's units could not be listed: {exc}"]
        if left:
            print(
                f"units still running, their records kept in {self.root / 'home'}:\n  "
                + "\n  ".join(left),
                file=sys.stderr,
            )
            return
        shutil.rmtree(self.root, ignore_errors=True)


def units_of(snap: Snapshot) -> list[Unit]:
    return [u.unit for d in snap.desired.deployments for u in d.units]


def converged(ws: Workspace) -> None:
    """Nothing left to do, every unit ready, each router serving its deployment's replicas."""
    snap = ws.look()
    units = units_of(snap)
    assert snap.plan.empty, snap.plan.counts
    assert len(units) == ws.replicas + len(ws.names), len(units)
    assert all(probes.is_ready(u) for u in units)
    routers = [u for u in units if u.role == "router"]
    assert len(routers) == len(ws.names)
    each = ws.replicas // len(ws.names)
    assert all(len(probes.router_workers(r) or {}) == each for r in routers)


def script_text(units: list[Unit], logs: Path, workers: int) -> str:
    """The hand-written launch script: engines in the background, each polled until ready,
    then the routers the same way, and each polled until it lists its `workers` engines (the
    state the bot's deploy ends in: a router's readiness passes with one)."""
    lines = [
        "set -eu",
        'ready() { until curl -fs -o /dev/null --max-time 2 "$1"; do sleep 0.2; done; }',
        # the router's worker list, polled as often as the bot polls it while it takes workers
        'listing() { until [ "$(curl -fs --max-time 2 "$1" | grep -o \'"url":\' | wc -l)"'
        ' -ge "$2" ]; do sleep 0.05; done; }',
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
    for unit in routers:
        lines.append(f"listing {shlex.quote(f'{probes.base_url(unit)}/workers')} {workers}")
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
    script.write_text(script_text(units, logs, ws.replicas // len(ws.names)))
    started = time.perf_counter()
    process = subprocess.Popen(["bash", str(script)], env=ws.env, start_new_session=True)
    try:
        code = process.wait(timeout=ws.timeout)
        seconds = time.perf_counter() - started
        if code != 0:
            raise SystemExit(f"the launch script failed ({code}); logs in {logs}")
        assert all(probes.is_ready(u) for u in units)
        each = ws.replicas // len(ws.names)
        routers = [u for u in units if u.role == "router"]
        assert all(len(probes.router_workers(r) or {}) == each for r in routers)
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


def one_repeat(
    ws: Workspace, script_first: bool, progress: Callable[[str], None]
) -> dict[str, float]:
    replicas, routers = ws.replicas, len(ws.names)
    row: dict[str, float] = {}

    def measured(step: str, seconds: float, answer: dict[str, Any] | None = None) -> None:
        row[step] = seconds
        said = f"{step} {seconds:.2f}s"
        if answer is not None:
            row[f"{step} pass"] = answer["seconds"]
            row[f"{step} apply"] = answer["apply_seconds"]
            said += f" (pass {answer['seconds']:.2f}s, apply {answer['apply_seconds']:.2f}s)"
        progress(f"{said}, load average {os.getloadavg()[0]:.1f}")

    ws.release(batch=128)
    units = units_of(ws.look())
    if script_first:
        measured("script", run_script(units, ws))
    seconds, first = ws.reconcile()
    assert first["done"].get("start") == replicas + routers, first
    measured("deploy", seconds, first)
    converged(ws)
    seconds, steady = ws.reconcile()
    assert steady["done"] == {}, steady
    measured("steady", seconds, steady)
    before = {u.id: u.pid for u in ws.agent.units()}
    ws.release(batch=64)
    seconds, rolled = ws.reconcile()
    assert rolled["done"].get("replace") == replicas, rolled
    measured("roll", seconds)
    converged(ws)
    after = {u.id: u.pid for u in ws.agent.units()}
    assert sum(after[i] != before.get(i) for i in after) == replicas
    if not script_first:
        left = ws.stop_all()
        assert not left, left
        wait(lambda: not any(map(listening, units)), 30, "the bot's units to exit")
        measured("script", run_script(units, ws))
    return row


def say(where: str, line: str) -> None:
    """Progress on stderr, a line per step as it ends (stdout keeps the table or the JSON)."""
    print(f"  {where}: {line}", file=sys.stderr, flush=True)


def point(args: argparse.Namespace, replicas: int) -> dict[str, Any]:
    """Medians over the repeats at one size, as the JSON object of that point."""
    timeout = args.timeout if args.timeout is not None else max(300.0, 15.0 * replicas)
    load_before = os.getloadavg()[0]
    rows = []
    for i in range(args.repeats):
        where = f"{replicas} replicas, repeat {i + 1}/{args.repeats}"
        ws = Workspace(replicas, args.deployments, args.spare_gpus, timeout)
        try:
            rows.append(one_repeat(ws, i % 2 == 1, partial(say, where)))
        finally:
            ws.teardown()
    m = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
    return {
        "replicas": replicas,
        "deploy_s": round(m["deploy"], 3),
        "script_s": round(m["script"], 3),
        "ratio": round(m["deploy"] / m["script"], 3),
        "pass_s": round(m["deploy pass"], 3),
        "apply_s": round(m["deploy apply"], 3),
        "apply_ratio": round(m["deploy apply"] / m["script"], 3),
        "steady_s": round(m["steady"], 3),
        "steady_pass_s": round(m["steady pass"], 3),
        "roll_s": round(m["roll"], 3),
        "roll_per_replica_s": round(m["roll"] / replicas, 3),
        "deployments": args.deployments,
        "spare_gpus": args.spare_gpus * args.deployments,
        "repeats": args.repeats,
        "load_before": load_before,
        "load_after": os.getloadavg()[0],
    }


def stop_on_sigterm() -> None:
    """SIGTERM unwinds like Ctrl-C, so that every unit is stopped on the way out."""

    def interrupt(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, interrupt)


def main() -> None:
    try:
        run(sys.argv[1:])
    except KeyboardInterrupt:
        raise SystemExit("interrupted (every unit stopped, unless named above)") from None


def run(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicas", default="1,4,16")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--deployments",
        type=int,
        default=1,
        help="releases the replicas split into, each with its own router (divides every N)",
    )
    parser.add_argument(
        "--spare-gpus",
        type=int,
        default=1,
        help="GPUs per deployment beyond its replicas' (0: rolls in place)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=None,
        help="seconds per step at most (default: 300, or 15 per replica where more)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON list of points")
    args = parser.parse_args(argv)
    sizes = [int(n) for n in args.replicas.split(",")]
    if args.deployments < 1 or any(n < 1 or n % args.deployments for n in sizes):
        parser.error(f"--deployments {args.deployments} must divide every --replicas size")
    stop_on_sigterm()
    if args.json:
        print(json.dumps([point(args, n) for n in sizes], indent=1))
        return
    print(
        f"Python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs, "
        f"load average {os.getloadavg()[0]:.1f}; {args.deployments} deployment(s), "
        f"{args.spare_gpus} spare GPU(s) each; medians of {args.repeats} repeats"
    )
    print(
        f"{'replicas':>8} | {'deploy':>7} {'pass':>7} {'script':>7} {'÷':>5} | "
        f"{'steady':>7} {'pass':>7} | {'roll':>7} {'/replica':>8} | load"
    )
    for replicas in sizes:
        m = point(args, replicas)
        print(
            f"{replicas:>8} | {m['deploy_s']:>6.2f}s {m['pass_s']:>6.2f}s "
            f"{m['script_s']:>6.2f}s {m['ratio']:>4.2f}× | {m['steady_s']:>6.2f}s "
            f"{m['steady_pass_s']:>6.2f}s | {m['roll_s']:>6.2f}s "
            f"{m['roll_per_replica_s']:>7.2f}s | {m['load_before']:.1f}–{m['load_after']:.1f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
