"""Faults on a seeded random schedule while a release rolls, scales and is promoted on the
sshd lab, with invariants checked after every one.

    .venv/bin/python benchmarks/chaos.py [--faults 200] [--seed 1] [--json] [--trace F]  # root

The lab: two hosts of four simulated H200s, each a real sshd in a network namespace of its own
(tests/labs/sshd.py), one fleet over both (`call_timeout: 2`, `connect_timeout: 1`), the
second host's unit records on a 1 MiB tmpfs (for the full disk), and a git repository of this
project's denv files whose release `chat-8b` runs a canary and a prod stage on that fleet,
prod promoted through the local forge once the canary baked (`bake: 1s`, `promotion: auto`,
no approval). Each round commits a change on top of what the bot merged (a roll: a new
max_batch; or a scale: 1 to 3 replicas a stage), injects one fault drawn with `--seed`, and
runs `denv reconcile --once` through it:

- `bot-kill`: the bot SIGKILLs itself at a step boundary drawn from the pass's steps;
- `bot-kill-forge`: the same at a step of a promotion on the forge (its branch moved, its
  pull request opened, main moved to the merge with the record still open, the merge
  recorded), in a pass after the change has rolled out on the canary and baked;
- `agent-kill` / `agent-stop`: at a step boundary, a host's resident agent is SIGKILLed, or
  SIGSTOPped until the pass ends;
- `engine-kill`: a running engine is SIGKILLed before the pass;
- `sshd-down`: a host's sshd and every session it forked (its agents) SIGKILLed: the host
  does not answer while its units run on (they are in sessions of their own); sshd is
  started again after the pass;
- `disk-full`: the second host's unit records' disk is filled for the pass;
- `corrupt-record`: a running engine's record is truncated; after the pass, `denv fleet
  repair` (the documented recovery) on that host;
- `rewind`: `main` is force-moved to the commit before the change (the bot's merges since
  then with it);
- `second-bot`: two bots run the pass at once.

A fault drawn that does not land (a kill at a step the pass never reached, say at a forge
step in a pass that promoted nothing) is not counted: the run goes on until `--faults` have
landed, and says how many did not.

After the faulted pass, no GPU of a host that answers may hold two live engines. Then the
fault is cleared and `--once` runs until it exits 0 (at most `--passes`); the time from the
cleared fault to that pass's end is the round's time to converge. There, every live unit on
each host must be a desired one (a replica of either stage as `denv status` counts it, the
canary's count the head's, or a stage's router) or listed among `denv status --json`'s
orphans, no process of a unit (DENV_UNIT in its environment, the host's agent home) runs that
no live record of its host names, no unit id runs on two hosts, no surge replica is left,
every replica is ready with no drift, no GPU holds two engines, no pull request on the forge
is open whose head main holds, and no promotion is committed twice on main. A round that does
not converge within `--passes` is a violation too. `--trace F` appends every denv command's
output to F.

Clients send traffic throughout (benchmarks/chaos_traffic.py): one per stage, asking its
endpoint (its router, as `denv status` last gave it) one short completion after another, not
streamed. No request may fail without an alarm seeing it: after every pass the run reads
the bot's router points from its lease note, and at each the 5xx the stage's routers
counted must be at least the failures its client saw end by then; at the end, after the
clients stop and a last pass, every failure must lie before a point. The lab's only alarm is
the default error rate set never to fire (`max: 100%`): what it counts is checked here, and
rolling back on it is tests/faults/test_error_rate_alarm.py's (a rollback would move the
desired state under the harness's feet). A stream cut after its first token is counted by
nothing (docs/operate.md): streams are not sent, and that case is not checked.
Prints per fault kind the count and the medians to converge, and the violations (goal 0);
`--json` prints the same as one object. Needs root (namespaces, tmpfs)."""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pygit2
from pygit2.enums import CheckoutStrategy

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from chaos_traffic import Clients, RouterPoints, unseen  # noqa: E402

from reconciler.fleet.hostagent import AgentClient  # noqa: E402
from reconciler.fleet.model.observed import UnitRecord  # noqa: E402
from reconciler.fleet.ssh import SshTransport  # noqa: E402
from reconciler.forge.local import LocalForge  # noqa: E402
from reconciler.forge.models import PrState  # noqa: E402
from reconciler.spec.fleet import Host  # noqa: E402
from tests.labs.disks import fill, mount_small_disk, unmount  # noqa: E402
from tests.labs.release import release_yaml, stage  # noqa: E402
from tests.labs.sshd import SshLab, SshServer, resident_agents, ssh_settings  # noqa: E402
from tests.labs.workspace import copy_denv_files  # noqa: E402
from tests.reconcile.conftest import GitRepo  # noqa: E402

FAULTS = (
    "bot-kill", "bot-kill-forge", "agent-kill", "agent-stop", "engine-kill", "sshd-down",
    "disk-full", "corrupt-record", "rewind", "second-bot",
)  # fmt: skip
STEPS = ("after-prepare", "after-free", "after-start", "after-routers", "roll-surged",
         "roll-drained", "roll-stopped", "roll-started", "after-roll", "after-trim")  # fmt: skip
# the steps of a promotion on the local forge: its branch moved, its pull request opened,
# main moved to the merge (the record still open), the merge recorded (the bot's note not)
FORGE_STEPS = ("forge-branch", "forge-opened", "forge-merged", "forge-recorded")
STAGES = ("canary", "prod")  # prod promoted automatically once the canary baked green
BAKE_S = 1.0  # each stage's bake
TIMING = ("--ready-timeout", "60s", "--drain", "1s", "--crash-backoff", "1s")
FLEET, RELEASE = "lab", "chat-8b"
HOSTS = ("h0", "h1")
TRACE: list[Path] = []  # --trace FILE: where every denv command's output goes


@dataclass
class Lab:
    folder: Path
    ssh: SshLab
    servers: dict[str, SshServer]
    repo: GitRepo
    cache: Path
    replicas: int = 2
    batch: int = 128
    history: list[tuple[str, int, int]] = field(default_factory=list)  # (sha, replicas, batch)
    endpoints: dict[str, str] = field(default_factory=dict)  # stage -> endpoint, as status said
    seen: RouterPoints = field(default_factory=RouterPoints)  # the bot's router points

    # --- the operator's side -------------------------------------------------------------

    def env(self, **extra: str) -> dict[str, str]:
        env = {**os.environ, "DENV_CACHE": str(self.cache), "DENV_HOME": str(self.cache / "home")}
        env.pop("DENV_REPO", None)
        return {**env, **extra}

    def argv(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "reconciler", *args, "--repo", str(self.repo.path)]

    def denv(self, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            self.argv(*args), capture_output=True, text=True, env=self.env(**extra), timeout=600
        )
        if TRACE:  # every command's output, for a post-mortem (--trace)
            with open(TRACE[0], "a") as trace:
                said = " ".join([*args, *(f"{k}={v}" for k, v in extra.items())])
                trace.write(f"--- {time.strftime('%H:%M:%S')} denv {said}: exit "
                            f"{done.returncode}\n{done.stdout}{done.stderr}")  # fmt: skip
        return done

    def reconcile(self, **extra: str) -> subprocess.CompletedProcess[str]:
        done = self.denv("reconcile", "--once", *TIMING, **extra)
        self.observe()
        return done

    def observe(self) -> None:
        """The bot's router points as its lease note has them now (its fleet's first host
        keeps the note; not answering: the next pass's note has them)."""
        with contextlib.suppress(Exception):
            self.seen.add(self.agent(HOSTS[0]).lease("reconciler", "chaos", 0, peek=True).note)

    def commit(self, replicas: int, batch: int) -> None:
        """The release's next version on main, on top of whatever the bot merged there."""
        self.repo.git.checkout_head(strategy=CheckoutStrategy.FORCE)  # type: ignore[no-untyped-call]
        text = release_yaml(
            stage("canary", FLEET, f"bake: {BAKE_S:g}s"),
            stage("prod", FLEET, f"bake: {BAKE_S:g}s", "promotion: auto", "approvals: 0"),
            replicas=replicas,
            batch=batch,
        )
        self.repo.write(f"releases/{RELEASE}/denv.yaml", text)
        sha = self.repo.commit(f"{RELEASE}: {replicas} replicas, max_batch {batch}")
        self.replicas, self.batch = replicas, batch
        self.history.append((sha, replicas, batch))

    def rewind(self) -> None:
        """`main` force-moved to the commit before the last change (the bot's merges since
        then with it), its files with it."""
        git = self.repo.git
        sha, _, _ = self.history.pop()
        parent = git.revparse_single(sha).peel(pygit2.Commit).parents[0]
        git.reset(parent.id, pygit2.enums.ResetMode.HARD)
        _, self.replicas, self.batch = self.history[-1]

    # --- the hosts' side -----------------------------------------------------------------

    def agent(self, host: str) -> AgentClient:
        server = self.servers[host]
        spec = Host(name=host, address=server.address, gpus=4)
        return AgentClient(SshTransport(spec, ssh_settings(self.ssh)), python=sys.executable)

    def units(self, host: str) -> list[UnitRecord]:
        return self.agent(host).units()

    def units_dir(self, host: str) -> Path:
        return self.servers[host].folder / "denv-home" / "units"

    def agents(self, host: str) -> list[int]:
        return resident_agents(self.servers[host])


def make_lab(folder: Path) -> Lab:
    ssh = SshLab(folder / "ssh", own_home=True)
    servers = {name: ssh.start(name, namespaced=True) for name in HOSTS}
    repo = GitRepo(copy_denv_files(folder / "repo"), folder / "clones")
    hosts = "".join(
        f"    - {{ name: {name}, address: {server.address}, gpus: 4 }}\n"
        for name, server in servers.items()
    )
    repo.write(
        f"fleets/{FLEET}.yaml",
        f"fleet:\n  name: {FLEET}\n  provider: test\n  hardware: h200\n  simulated: true\n"
        f"  python: {sys.executable}\n  transport: ssh\n"
        f"  ssh: {{ user: root, key_file: {ssh.client_key}, known_hosts: {ssh.known_hosts}, "
        f"connect_timeout: 1, call_timeout: 2 }}\n  hosts:\n{hosts}",
    )
    # The default error-rate alarm, set never to fire: what it counts is checked here (every
    # failed request), not what it does (a rollback moves the desired state under the
    # harness's feet; tests/faults/test_error_rate_alarm.py checks that it rolls back).
    repo.write(
        "policies/alarms.yaml",
        "defaults:\n"
        "  error-rate: { metric: error_rate, max: 100%, window: 5m, min_requests: 50 }\n",
    )
    repo.commit("the lab's fleet, its error-rate alarm counting only")
    lab = Lab(folder, ssh, servers, repo, folder / "cache")
    mount_small_disk(lab.units_dir("h1"))
    # A namespaced sshd runs in a mount namespace of its own, copied when it started, and
    # this machine's mounts need not propagate into it: h1 started again sees the small disk.
    # (Before, h1's first agent wrote its records beneath it, and once h1 was started again
    # by a fault, those records were hidden and their engines ran on with none.)
    servers["h1"].kill()
    ssh.restart(servers["h1"])
    return lab


def teardown(lab: Lab) -> None:
    """Every unit stopped through its agent, with whatever fault the run ended in undone
    first; then anything of the lab's still running (its folder in its environment or
    command line) killed, the hosts stopped, the disk unmounted, the folder removed."""
    with contextlib.suppress(Exception):
        undo_every_fault(lab)
    for host in HOSTS:
        with contextlib.suppress(Exception):
            agent = lab.agent(host)
            for unit in agent.units():
                agent.stop(unit.id, grace=1)
    lab.ssh.stop()
    mark = str(lab.folder).encode()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):
            seen = (
                Path("/proc", pid, "cmdline").read_bytes()
                + Path("/proc", pid, "environ").read_bytes()
            )
            if mark in seen and int(pid) != os.getpid():
                os.kill(int(pid), signal.SIGKILL)
    unmount(lab.units_dir("h1"))
    shutil.rmtree(lab.folder, ignore_errors=True)


# --- faults ---------------------------------------------------------------------------------


def paused_pass(lab: Lab, step: str, act: Callable[[], None]) -> bool:
    """A pass that stops at `step` (the first time it gets there) while `act` runs, then
    goes on to its end; whether it got there (and `act` ran)."""
    marker = lab.folder / "paused"
    marker.unlink(missing_ok=True)
    argv = lab.argv("reconcile", "--once", *TIMING)
    env = lab.env(DENV_FAULT_PAUSE_AT=f"{step}:{marker}")
    bot = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while not marker.exists() and bot.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    reached = marker.exists()
    if reached:
        act()
    while bot.poll() is None:  # a step met again (the next replica's) pauses again: go on
        marker.unlink(missing_ok=True)
        time.sleep(0.05)
    lab.observe()
    return reached


def live_engines(units: list[UnitRecord]) -> list[UnitRecord]:
    return [u for u in units if u.alive and not u.id.endswith("router")]


def inject(lab: Lab, fault: str, rng: random.Random) -> tuple[Callable[[], object], bool]:
    """Run the round's pass through `fault`: what clears the fault afterwards, and whether
    it landed (a kill at a step the pass never reached, an engine-kill with no engine, did
    not: such a round is not counted among the faults injected)."""
    host = rng.choice(HOSTS)
    cleared: Callable[[], object] = lambda: None  # noqa: E731
    landed = True
    if fault in ("bot-kill", "bot-kill-forge"):
        step = rng.choice(STEPS if fault == "bot-kill" else FORGE_STEPS)
        if fault == "bot-kill-forge":  # the change on the canary, baked: this pass promotes
            converge(lab, passes=5)
            lab.reconcile()  # the first pass to see the canary ready: its bake starts
            time.sleep(BAKE_S + 0.5)
        landed = lab.reconcile(DENV_FAULT_KILL_AT=step).returncode == -signal.SIGKILL
    elif fault in ("agent-kill", "agent-stop"):
        stopped: list[int] = []

        def act() -> None:
            for pid in lab.agents(host):
                os.kill(pid, signal.SIGKILL if fault == "agent-kill" else signal.SIGSTOP)
                stopped.append(pid)

        def resume() -> None:
            for pid in stopped:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)

        landed = paused_pass(lab, rng.choice(STEPS), act) and bool(stopped)
        cleared = resume
    elif fault == "engine-kill":
        engines = [u for u in live_engines(lab.units(host)) if u.pid]
        landed = bool(engines)
        if engines:
            with contextlib.suppress(ProcessLookupError):
                os.kill(rng.choice(engines).pid or 0, signal.SIGKILL)
        lab.reconcile()
    elif fault == "sshd-down":
        cleared = functools.partial(lab.ssh.restart, lab.servers[host])
        lab.servers[host].kill()
        lab.reconcile()
    elif fault == "disk-full":
        filler = lab.units_dir("h1") / "filler"
        cleared = functools.partial(filler.unlink, missing_ok=True)  # whatever happens next
        fill(lab.units_dir("h1"))
        lab.reconcile()
    elif fault == "corrupt-record":
        engines = live_engines(lab.units(host))
        landed = bool(engines)
        if engines:
            path = lab.units_dir(host) / f"{rng.choice(engines).id}.json"
            path.write_bytes(path.read_bytes()[:40])
        lab.reconcile()

        def repair() -> None:  # the documented recovery
            lab.denv("fleet", "repair", FLEET, "--host", host, "--grace", "1s")

        cleared = repair
    elif fault == "rewind":
        lab.rewind()
        lab.reconcile()
    elif fault == "second-bot":
        argv, env = lab.argv("reconcile", "--once", *TIMING), lab.env()
        null = subprocess.DEVNULL
        bots = [subprocess.Popen(argv, env=env, stdout=null, stderr=null) for _ in range(2)]
        for bot in bots:
            bot.wait(timeout=600)
        lab.observe()
    else:
        raise ValueError(fault)
    return cleared, landed


def undo_every_fault(lab: Lab) -> None:
    """After a round the harness itself failed in: whatever fault it left is cleared (the
    disk emptied, a killed sshd started, a stopped agent continued)."""
    (lab.units_dir("h1") / "filler").unlink(missing_ok=True)
    for host, server in lab.servers.items():
        if server.process is None or server.process.poll() is not None:
            lab.ssh.restart(server)
        for pid in lab.agents(host):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)


# --- invariants -----------------------------------------------------------------------------


def two_on_a_gpu(lab: Lab) -> list[str]:
    """Hosts that answer, where one GPU holds two live engines."""
    found = []
    for host in HOSTS:
        try:
            engines = live_engines(lab.units(host))
        except Exception:
            continue  # not answering (down, record unreadable): nothing to read there
        gpus = [g for u in engines for g in u.gpus]
        if len(gpus) != len(set(gpus)):
            found.append(f"{host}: two engines on one GPU: {[(u.id, u.gpus) for u in engines]}")
    return found


def untracked(lab: Lab) -> list[str]:
    """Processes of a unit (DENV_UNIT in their environment, the host's agent home) that no
    live record of that host names: an engine or router denv started and no longer knows."""
    found = []
    for host in HOSTS:
        try:
            known = {u.pid for u in lab.units(host) if u.alive}
        except Exception:
            continue  # not answering: nothing to compare with
        home = f"DENV_HOME={lab.servers[host].folder / 'denv-home'}".encode()
        for pid in filter(str.isdigit, os.listdir("/proc")):
            with contextlib.suppress(OSError):
                environ = Path("/proc", pid, "environ").read_bytes().split(b"\0")
                unit = next((e[10:] for e in environ if e.startswith(b"DENV_UNIT=")), None)
                if unit is not None and home in environ and int(pid) not in known:
                    found.append(f"{host}: pid {pid} of {unit.decode()} runs with no record")
    return found


def converged(lab: Lab) -> list[str]:
    """What is wrong with the lab as the last pass left it; [] when it is as desired."""
    problems = two_on_a_gpu(lab) + forge_problems(lab) + untracked(lab)
    done = lab.denv("status", "--json")
    if done.returncode != 0:
        return [*problems, f"status exited {done.returncode}: {done.stderr[-300:]}"]
    status = json.loads(done.stdout)
    lab.endpoints.update(
        {
            d["stage"]: d["endpoint"]
            for d in status["deployments"]
            if d["fleet"] == FLEET and d["release"] == RELEASE and d.get("endpoint")
        }
    )
    orphans = {(o["host"], o["unit"]) for o in status["orphans"]}
    rows = {
        d["stage"]: d
        for d in status["deployments"]
        if d["fleet"] == FLEET and d["release"] == RELEASE
    }
    desired: set[str] = set()
    for name in STAGES:
        row = rows.get(name)
        if row is None:
            problems.append(f"status: no {name} deployment")
            continue
        count = row["replicas"]  # prod's: as its pinned revision says
        if name == "canary" and count != lab.replicas:
            problems.append(f"status: canary wants {count} replicas, the head {lab.replicas}")
        if (row["ready"], row["drift"]) != (count, ""):
            problems.append(f"status: {name} {row['ready']}/{count} ready, {row['drift']!r}")
        prefix = f"{RELEASE}.{name}.{FLEET}"
        desired |= {f"{prefix}.aggregated-{i}" for i in range(count)} | {f"{prefix}.router"}
    where: dict[str, str] = {}
    for host in HOSTS:
        for unit in lab.units(host):
            if not unit.alive:
                continue
            if unit.id in where:
                problems.append(f"{unit.id} runs on {where[unit.id]} and {host}")
            where[unit.id] = host
            if unit.id not in desired and (host, unit.id) not in orphans:
                problems.append(f"{host}: {unit.id} runs, neither desired nor shown orphaned")
    missing = desired - set(where)
    if missing:
        problems.append(f"not running: {sorted(missing)}")
    return problems


def forge_problems(lab: Lab) -> list[str]:
    """No pull request open whose head main holds (its change merged), and no change
    committed twice on main (two promotions of one revision to one stage)."""
    git = lab.repo.git
    main = git.head.target
    problems = []
    for pr in LocalForge(lab.repo.path).pull_requests(PrState.OPEN):
        head = pygit2.Oid(hex=pr.head_sha)
        if head == main or git.descendant_of(main, head):
            problems.append(f"pull request #{pr.number} ({pr.head_branch}) open, merged in main")
    promotions = Counter(
        commit.message.splitlines()[0]
        for commit in git.walk(main)
        if commit.author.name == "denv-bot" and " promote " in commit.message
    )
    problems += [f"committed {n} times: {m}" for m, n in promotions.items() if n > 1]
    return problems


def converge(lab: Lab, passes: int) -> tuple[float | None, list[str]]:
    """`--once` until it exits 0 and the lab is as desired: the seconds until that pass ended
    (None: it never was), and what was wrong at the last look."""
    began = time.monotonic()
    problems: list[str] = []
    for _ in range(passes):
        done = lab.reconcile()
        ended = time.monotonic()  # the checks after it are not the bot's time
        if done.returncode == 0:
            problems = converged(lab)
            if not problems:
                return ended - began, []
        else:
            problems = [(done.stdout + done.stderr).strip().splitlines()[0][:300]]
    return None, problems


# --- the run --------------------------------------------------------------------------------


def change(lab: Lab, rng: random.Random) -> None:
    """The round's commit: a roll (another max_batch) or a scale (another replica count, 1 to 3
    a stage: both stages and a surge replica fit on the 8 GPUs)."""
    if rng.random() < 0.5:
        lab.commit(lab.replicas, rng.choice([b for b in (64, 96, 128, 160) if b != lab.batch]))
    else:
        lab.commit(rng.choice([n for n in (1, 2, 3) if n != lab.replicas]), lab.batch)


def failed_since(clients: Clients, stage: str, seconds: float = 60.0) -> str:
    """The stage's failures of the last minute, by endpoint and why: what went unseen."""
    now = time.time()
    found = Counter(
        f"{f.why} at {f.endpoint}"
        for f in clients.failures
        if f.stage == stage and f.ended > now - seconds
    )
    return ", ".join(f"{n}× {what}" for what, n in found.most_common(4))


def stage_key(stage: str) -> str:
    return f"{RELEASE}/{stage}"


def say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def run(faults: int, seed: int, passes: int) -> dict[str, Any]:
    rng = random.Random(seed)
    folder = Path(tempfile.mkdtemp(prefix="denv-chaos-"))
    lab = make_lab(folder)
    times: dict[str, list[float]] = {kind: [] for kind in FAULTS}
    injected: Counter[str] = Counter()  # faults that landed
    missed: Counter[str] = Counter()  # drawn, and did not land (a step the pass never met)
    errors: list[dict[str, Any]] = []
    violations: list[dict[str, Any]] = []
    began = time.monotonic()
    number = 0
    clients = Clients(STAGES, RELEASE)
    reported: dict[str, int] = {}  # stage -> failures unseen so far, as last reported
    try:
        lab.commit(2, 128)
        seconds, problems = converge(lab, passes)
        if seconds is None:
            raise RuntimeError(f"the lab never converged before any fault: {problems}")
        clients.point(lab.endpoints)
        clients.start()
        while sum(injected.values()) < faults and number < 3 * faults:
            number += 1
            change(lab, rng)
            # every kind once first, so that a short run still meets each
            fault = FAULTS[number - 1] if number <= len(FAULTS) else rng.choice(FAULTS)
            try:
                cleared, landed = inject(lab, fault, rng)
            except Exception as exc:  # the harness's own failure, not the bot's: said apart
                errors.append({"fault": number, "kind": fault, "error": repr(exc)[:300]})
                cleared, landed = functools.partial(undo_every_fault, lab), False
            (injected if landed else missed)[fault] += 1
            during = two_on_a_gpu(lab)
            cleared()
            seconds, problems = converge(lab, passes)
            if seconds is not None and landed:
                times[fault].append(seconds)
            clients.point(lab.endpoints)
            for stage, gap in unseen(clients.failures, lab.seen, stage_key).items():
                if gap.short > reported.get(stage, 0):  # cumulative: only what is new
                    reported[stage] = gap.short
                    problems.append(f"{gap.describe(stage)}: {failed_since(clients, stage)}")
            for problem in [*during, *problems]:
                violations.append({"fault": number, "kind": fault, "problem": problem})
            took = f"{seconds:.1f}s" if seconds is not None else "never"
            wrong = len(during) + len(problems)
            what = fault if landed else f"{fault} (did not land)"
            say(f"[{sum(injected.values())}/{faults}] {what}: converged in {took}; "
                f"{wrong} violation(s)")  # fmt: skip
            for problem in [*during, *problems]:
                say(f"  {problem}")
        clients.stop()
        converge(lab, passes)  # its scrape counts what the routers answered last
        final = unseen(clients.failures, lab.seen, stage_key, final=True)
        for stage, gap in final.items():
            if gap.late or gap.short > reported.get(stage, 0):
                problem = gap.describe(stage)
                violations.append({"fault": number, "kind": "end", "problem": problem})
        merged = len(LocalForge(lab.repo.path).pull_requests(PrState.MERGED))
    finally:
        clients.stop()
        teardown(lab)
    every = [t for found in times.values() for t in found]
    return {
        "faults": faults,
        "seed": seed,
        "rounds": number,
        "injected": sum(injected.values()),
        "did_not_land": sum(missed.values()),
        "promotions_merged": merged,
        "requests": {
            "answered": clients.answered,
            "failed": len(clients.failures),
            "failed_by_why": dict(Counter(f.why for f in clients.failures).most_common()),
            "router_points": sum(len(by_at) for by_at in lab.seen.points.values()),
        },
        "violations": violations,
        "harness_errors": errors,
        "minutes": round((time.monotonic() - began) / 60, 1),
        "converge_median_s": round(statistics.median(every), 1) if every else None,
        "converge_max_s": round(max(every), 1) if every else None,
        "by_kind": {
            kind: {
                "injected": injected[kind],
                "did_not_land": missed[kind],
                "converge_median_s": round(statistics.median(found), 1) if found else None,
                "converge_max_s": round(max(found), 1) if found else None,
            }
            for kind, found in times.items()
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--faults", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--passes", type=int, default=5, help="passes allowed to converge")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--trace", type=Path, help="append every denv command's output here")
    args = parser.parse_args()
    if args.trace:
        TRACE.append(args.trace)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # the lab is taken down still
    if os.geteuid() != 0:
        sys.exit("chaos.py needs root: its hosts are sshd in network namespaces, a disk a tmpfs")
    answer = run(args.faults, args.seed, args.passes)
    if args.json:
        print(json.dumps(answer, indent=2))
        return
    print(f"{answer['injected']} faults landed (seed {answer['seed']}; {answer['rounds']} rounds, "
          f"{answer['did_not_land']} drawn that did not land) in {answer['minutes']} min; "
          f"{answer['promotions_merged']} promotions merged; "
          f"{answer['requests']['answered']} requests answered, "
          f"{answer['requests']['failed']} failed {answer['requests']['failed_by_why']}, "
          f"{answer['requests']['router_points']} router points read; "
          f"{len(answer['violations'])} invariant violation(s); converged: median "
          f"{answer['converge_median_s']} s, max {answer['converge_max_s']} s")  # fmt: skip
    for kind, row in answer["by_kind"].items():
        print(f"  {kind:15} {row['injected']:4} (+{row['did_not_land']} not landed)  converged: "
              f"median {row['converge_median_s']} s, max {row['converge_max_s']} s")  # fmt: skip
    for error in answer["harness_errors"]:
        print(f"  not injected, fault {error['fault']} ({error['kind']}): {error['error']}")
    for violation in answer["violations"]:
        print(f"  violation after fault {violation['fault']} ({violation['kind']}): "
              f"{violation['problem']}")  # fmt: skip


if __name__ == "__main__":
    main()
