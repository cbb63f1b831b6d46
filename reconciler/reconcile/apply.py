"""Adapter: carrying out a plan on the fleets, wave by wave, health-gated.

0. prepare — every host that starts or replaces a unit makes its runtime and weights ready
   (reconciler.fleet.prepare), before any replica is stopped; a deployment with a host that
   cannot is left as it runs;
1. free — stop units nothing wants (their GPUs and ports may be where new units go);
2. start — engines, wait until ready, then routers, wait until ready;
3. routers — each router's worker list made to match the replicas that are ready;
4. roll — replica by replica. Where free GPUs allow (surge), a replica of the new spec starts
   first beside the old one, on other GPUs and another port, and joins the router; then the
   old replica leaves the router, drains (in-flight requests finish, up to a grace time),
   stops, starts again on the new spec in its own place, becomes ready and rejoins; then the
   surge replica drains and stops. Without free GPUs the same happens without the surge
   replica: one replica unavailable at a time, refused when the gates policy says
   `max_unavailable: 0`. A replica that never becomes ready is put back on its previous spec
   and the roll of that deployment stops with the error;
5. trim — what a deployment no longer needs leaves its router, drains, and stops.

Every step reads what it needs from the plan, which is computed afresh from what the agents
report each pass, and every agent verb is idempotent: a reconciler killed at any point
converges on its next pass. A unit that keeps crashing is started again with exponential
backoff (from its record's restart count and start time).

Within a wave, actions run at once — starts, stops and router updates on different hosts,
the rolls of different deployments — at most the fleet's `parallel_actions` at a time on a
fleet, fleets side by side; the replaces of one deployment stay one after another, in the
plan's order. An action that fails is reported and the others go on; a host that does not
answer holds only its own actions, for as long as its driver's deadline.

SIGTERM (`stopping`) ends every wait within seconds — prepare's polls, readiness, drains,
routers taking a worker — and starts no further action; what is left is what a kill at
that point leaves, and the next pass takes it up: a prepare job goes on on its host and is
joined, a unit started is kept once ready, a replica drained but not stopped rejoins its
router, a surge replica left over is stopped.
"""

from __future__ import annotations

import functools
import os
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from reconciler.engines.units import Unit
from reconciler.errors import DenvError, failure
from reconciler.fleet.drivers.base import FleetDriver
from reconciler.fleet.drivers.registry import Drivers
from reconciler.fleet.launching import launch_payload
from reconciler.fleet.model.labels import DeploymentKey
from reconciler.fleet.model.observed import FleetObservation, UnitRecord
from reconciler.fleet.placement.gpus import declared_states, trial_gpus
from reconciler.fleet.prepare import JobState, prepare_hosts, prepare_payload, weights_request
from reconciler.fleet.threads import run_all, run_grouped
from reconciler.reconcile import probes
from reconciler.reconcile.desired import DesiredDeployment
from reconciler.reconcile.plan import Action, ActionKind, Plan, Wave
from reconciler.reconcile.surge import surge_unit
from reconciler.spec.repo import Repo

# Seconds between asking a host's agent whether a unit waited on has exited: each ask reads
# every unit record on the host, and 16 replicas starting at once are 16 waits.
EXIT_CHECK_S = 1.0
# A job submitted to a scheduler waits for its next scheduling cycle: only after this long is
# a job the queue holds (Resources, Priority) reported as pending instead of waited for.
QUEUE_GRACE_S = 10.0
FAULT_ENV = "DENV_FAULT_KILL_AT"  # test hook: SIGKILL ourselves at this step boundary


@dataclass(frozen=True)
class ApplyOptions:
    ready_timeout: float = 900.0  # an engine loading hundreds of GB of weights takes minutes
    drain_grace: float = 30.0  # in-flight streams get this long to finish
    stop_grace: float = 10.0  # SIGTERM, then SIGKILL
    backoff_base: float = 10.0  # crash loop: after the first restart 10, 20, 40 … seconds
    backoff_max: float = 300.0


DEFAULTS = ApplyOptions()


@dataclass
class ApplyReport:
    done: Counter[str] = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)
    waiting: list[str] = field(default_factory=list)  # crash-looping units in backoff
    # jobs the scheduler ended (cancelled, preempted, at their time limit) submitted again
    resubmitted: list[str] = field(default_factory=list)
    # actions of a wave report from their threads: count, error and wait take it
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def count(self, kind: str) -> None:
        with self._lock:
            self.done[kind] += 1

    def error(self, message: str) -> None:
        with self._lock:
            self.errors.append(message)

    def wait(self, message: str) -> None:
        with self._lock:
            self.waiting.append(message)

    def resubmit(self, message: str) -> None:
        with self._lock:
            self.resubmitted.append(message)


T = TypeVar("T")
R = TypeVar("R")


def backoff(restarts: int, options: ApplyOptions) -> float:
    """Seconds to wait after an exit before the next start: none for the first crash."""
    if restarts == 0:
        return 0.0
    return float(min(options.backoff_base * 2 ** (restarts - 1), options.backoff_max))


PAUSE_ENV = "DENV_FAULT_PAUSE_AT"  # test hook: "STEP:FILE" — create FILE, wait while it exists


def fault_point(name: str) -> None:
    if os.environ.get(FAULT_ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)
    step, _, marker = os.environ.get(PAUSE_ENV, "").partition(":")
    if step == name and marker:
        Path(marker).touch()
        probes.wait_until(lambda: not Path(marker).exists(), timeout=120, interval=0.05)


class Applier:
    def __init__(
        self,
        repo: Repo,
        drivers: Drivers,
        options: ApplyOptions = DEFAULTS,
        say: Callable[[str], None] = lambda message: None,
        stopping: Callable[[], bool] = lambda: False,
    ) -> None:
        self.repo = repo
        self.drivers = drivers
        self.options = options
        self.say = say
        self.requested = stopping  # SIGTERM: end every wait now, start no other action
        self.report = ApplyReport()
        self.observations: Mapping[str, FleetObservation] = {}
        # Shared by the actions of a wave, under _lock: the URLs of surge replicas each
        # deployment's router keeps meanwhile, and the GPUs and ports of surge replicas
        # placed and not yet stopped, by (fleet, host), that no other surge may take.
        self.surging: dict[tuple[str, str, str], set[str]] = {}
        self._surge_gpus: dict[tuple[str, str], set[int]] = {}
        self._surge_ports: dict[tuple[str, str], set[int]] = {}
        self._lock = threading.Lock()
        self._said = threading.Lock()
        self._halted = threading.Event()  # the caller left a wave early (Ctrl-C, a bug)

    def stopping(self) -> bool:
        return self._halted.is_set() or self.requested()

    def _tell(self, line: str) -> None:
        """One whole line of progress, whichever action's thread says it."""
        with self._said:
            self.say(line)

    def _each(
        self, work: Callable[[T], R], items: Sequence[T], fleet_of: Callable[[T], str]
    ) -> list[R]:
        """`work` on every item at once, at most the fleet's `parallel_actions` at a time on
        one fleet, fleets side by side; results in order. When the caller leaves before all
        are done (Ctrl-C), the others stop as on SIGTERM."""
        finished: list[None] = []

        def one(item: T) -> R:
            result = work(item)
            finished.append(None)
            return result

        def leave() -> None:
            if len(finished) < len(items):
                self._halted.set()

        def bound(fleet: str) -> int:
            return self.repo.fleets[fleet].parallel_actions

        return run_grouped(one, items, fleet_of, bound, stop=leave)

    # --- drivers -------------------------------------------------------------------------

    def driver(self, fleet: str) -> FleetDriver:
        with self._lock:  # the session's drivers are made on first use, by any action
            return self.drivers.get(self.repo.fleets[fleet])

    def _launch(self, action: Action) -> None:
        assert action.desired is not None
        self.driver(action.fleet).launch(action.host, action.desired.payload())
        fault_point("launched")  # the unit is submitted; nothing after it was done

    def _stop(self, fleet: str, host: str, unit: str) -> None:
        self.driver(fleet).stop(host, unit, grace=self.options.stop_grace)

    def _relaunch(self, fleet: str, host: str, record: UnitRecord) -> None:
        """Start a unit again exactly as it ran (a failed replace goes back to it)."""
        payload = {
            "id": record.id,
            "digest": record.digest,
            "argv": list(record.argv),
            "env": dict(record.env),
            "port": record.port,
            "gpus": list(record.gpus),
            "labels": dict(record.labels),
            "restart": record.restart,
        }
        if len(record.nodes) > 1:  # a scheduler's job over several nodes: all of them again
            payload["hosts"] = list(record.nodes)
        self.driver(fleet).launch(host, payload)

    def _guard(self, what: str, step: Callable[[], object]) -> bool:
        try:
            step()
            return True
        except Exception as exc:  # one action's failure is its own: the others go on
            self.report.error(f"{what}: {failure(exc)}")
            return False

    # --- the waves -----------------------------------------------------------------------

    def apply(
        self,
        plan: Plan,
        deployments: Sequence[DesiredDeployment],
        observations: Mapping[str, FleetObservation] | None = None,
    ) -> ApplyReport:
        self.observations = observations or {}
        self._desired_gpus: dict[tuple[str, str], set[int]] = {}
        self._desired_ports: dict[tuple[str, str], set[int]] = {}
        for deployment in deployments:
            for wanted in deployment.units:
                key = (wanted.fleet, wanted.host)
                self._desired_gpus.setdefault(key, set()).update(wanted.unit.gpu_indices)
                if wanted.unit.port:
                    self._desired_ports.setdefault(key, set()).add(wanted.unit.port)
        blocked = self._prepare(plan)
        by_wave: dict[Wave, list[Action]] = {}
        for action in plan.actions:
            if (action.release, action.stage, action.fleet) not in blocked:
                by_wave.setdefault(action.wave, []).append(action)
        fault_point("after-prepare")
        self._stop_all(by_wave.get(Wave.FREE, []))
        fault_point("after-free")
        self._start(by_wave.get(Wave.START, []))
        fault_point("after-start")
        self._sync_routers(deployments)
        fault_point("after-routers")
        self._roll(by_wave.get(Wave.ROLL, []), deployments)
        fault_point("after-roll")
        self._sync_routers(deployments)
        self._stop_all(by_wave.get(Wave.TRIM, []))  # their routers were synced
        fault_point("after-trim")
        return self.report

    def _prepare(self, plan: Plan) -> set[tuple[str, str, str]]:
        """Runtimes and weights ready on every host before anything is stopped; the
        deployments with a host that could not prepare are left as they run (returned)."""
        wanted: dict[tuple[str, str, str | None], list[Action]] = {}
        for action in plan.actions:
            unit = action.desired
            if action.kind == ActionKind.KEEP or action.kind == ActionKind.STOP or unit is None:
                continue
            if unit.need is not None or unit.weights is not None:
                wanted.setdefault((action.fleet, action.host, unit.weights), []).append(action)
        if not wanted:
            return set()
        asks, payloads = {}, {}
        for (fleet, host, weights), actions in sorted(wanted.items(), key=str):
            key = f"{host} {weights or ''}".strip()
            needs = [a.desired.need for a in actions if a.desired and a.desired.need]
            spec = self.repo.fleets[fleet]
            payloads[key] = prepare_payload(needs, weights_request(spec, weights), host)
            asks[key] = (host, functools.partial(self.driver(fleet).prepare, host))
        parallel = min(self.repo.fleets[f].weights.parallel for f, _, _ in wanted)
        shown: dict[str, str] = {}

        def progress(key: str, state: JobState) -> None:
            line = f"{state.step} {state.bytes_done / 1e9:.1f}/{state.bytes_total / 1e9:.1f} GB"
            if shown.get(key) != state.step:  # one line per step and host
                shown[key] = state.step
                self._tell(f"prepare {key}: {line}")

        done, errors = prepare_hosts(asks, payloads, parallel, progress, stopping=self.stopping)
        blocked: set[tuple[str, str, str]] = set()
        for (_, host, weights), actions in wanted.items():
            key = f"{host} {weights or ''}".strip()
            error = errors.get(key)
            if error is not None:
                self.report.error(f"{error}; nothing of it was stopped or started")
            elif key not in done:
                self.report.wait(
                    f"prepare {key}: stopped following it (SIGTERM); its job goes on on the "
                    f"host and the next pass resumes it"
                )
            else:
                continue
            blocked |= {(a.release, a.stage, a.fleet) for a in actions}
        return blocked

    def _stop_all(self, actions: list[Action]) -> None:
        """Routers first, then engines (a router never sends to an engine stopped under it)."""
        routers = [a for a in actions if a.role == "router"]
        engines = [a for a in actions if a.role != "router"]
        for batch in (routers, engines):
            self._each(self._stop_one, batch, _fleet)

    def _stop_one(self, action: Action) -> None:
        if self.stopping():
            return
        self._tell(f"- stop {action.unit} on {action.host} ({action.reason})")
        stop = functools.partial(self._stop, action.fleet, action.host, action.unit)
        if self._guard(action.unit, stop):
            self.report.count("stop")

    def _start(self, actions: list[Action]) -> None:
        engines = [a for a in actions if a.role != "router"]
        routers = [a for a in actions if a.role == "router"]
        queued: set[DeploymentKey] = set()  # deployments with an engine the queue holds
        for batch in (engines, routers):
            launched = self._each(self._start_one, batch, _fleet)
            started = [a for a, ok in zip(batch, launched, strict=True) if ok]
            # a router whose engines wait in a scheduler's queue cannot be ready yet
            idle = [a for a in started if a.role == "router" and _key(a) in queued]
            for action in idle:
                self.report.count("start")
                self.report.wait(f"{action.unit}: started, ready once its engines run")
            started = [a for a in started if a not in idle]
            ready = run_all(self._wait_ready, started, min(16, len(started)))
            for action, ok in zip(started, ready, strict=True):
                if ok:
                    self.report.count("start")
                elif self.stopping():
                    self._left(action.unit, "started, not ready yet")
                elif why := self._queued(action.fleet, action.host, action.unit):
                    self.report.count("submit")
                    self.report.wait(f"{action.unit} on {action.host}: pending ({why})")
                    queued.add(_key(action))
                else:
                    self.report.error(
                        f"{action.unit} on {action.host}: not ready after "
                        f"{self.options.ready_timeout:g}s (see `denv fleet logs`)"
                    )

    def _left(self, unit: str, state: str) -> None:
        """A step SIGTERM cut short: the next pass takes the unit up from where it is."""
        self.report.wait(f"{unit}: {state} at SIGTERM; the next pass resumes")

    def _start_one(self, action: Action) -> bool:
        if self.stopping():
            return False
        record = action.running
        if record is not None and not record.alive and record.exited_at is not None:
            left = record.exited_at + backoff(record.restarts, self.options) - time.time()
            if left > 0:
                self.report.wait(
                    f"{action.unit} keeps exiting (exit {record.exit_code}, "
                    f"{record.restarts} restarts): next start in {left:.0f}s"
                )
                return False
        ended = record is not None and record.queue is not None and not record.pending
        self._tell(f"+ start {action.unit} on {action.host}" + (f" ({action.reason})" * ended))
        if ended:  # the scheduler ended its job: the pass says so
            self.report.resubmit(f"{action.unit} ({action.reason})")
        return self._guard(action.unit, lambda: self._launch(action))

    def _queued(self, fleet: str, host: str, unit_id: str) -> str | None:
        """Why the unit's job waits in the scheduler's queue; None when it does not."""
        try:
            found = [r for r in self.driver(fleet).units(host) if r.id == unit_id]
        except DenvError:
            return None
        pending = next((r for r in found if r.pending), None)
        return (pending.queue_reason or "queued") if pending is not None else None

    def _wait_ready(self, action: Action) -> bool:
        assert action.desired is not None
        return self._wait_unit(action.fleet, action.host, action.unit, action.desired.unit)

    def _wait_unit(self, fleet: str, host: str, unit_id: str, unit: Unit) -> bool:
        """Ready within the timeout; False at once when the process exits meanwhile, or
        when SIGTERM comes."""
        driver = self.driver(fleet)
        asked = [0.0]  # when the agent was last asked: readiness is polled 5 times as often
        began = time.monotonic()

        def exited_or_stopping() -> bool:  # a supervised unit (a router) between two starts
            if self.stopping():  # has exited too
                return True
            if time.monotonic() - asked[0] < EXIT_CHECK_S:
                return False
            asked[0] = time.monotonic()
            # a job the scheduler still holds back (Resources) after QUEUE_GRACE_S is not
            # waited for: the pass says it is pending, the next one looks again
            held_back = time.monotonic() - began > QUEUE_GRACE_S
            return any(
                r.id == unit_id
                and (r.exit_code is not None or not r.alive)
                and (not r.pending or (held_back and r.queue_reason is not None))
                for r in driver.units(host)
            )

        return probes.wait_until(
            lambda: probes.is_ready(unit), self.options.ready_timeout, abort=exited_or_stopping
        )

    # --- routers -------------------------------------------------------------------------

    def _sync_routers(self, deployments: Sequence[DesiredDeployment]) -> None:
        """Each ready router serves exactly the ready engines its deployment wants."""
        self._each(self._sync_router, deployments, lambda d: d.fleet)

    def _sync_router(self, deployment: DesiredDeployment, leaving: str | None = None) -> None:
        """The deployment's own router, with its own engines and surge replicas only."""
        router = next((u.unit for u in deployment.units if u.unit.role == "router"), None)
        engines = [u.unit for u in deployment.units if u.unit.role == "aggregated" and u.unit.port]
        if router is None or not engines:
            return  # P/D routers take their workers from their argv
        listed = probes.router_workers(router)
        if listed is None:
            return  # not up (yet): the next pass syncs it
        urls = {probes.base_url(u): u for u in engines}
        wanted = {url for url, u in urls.items() if url and url != leaving and probes.is_ready(u)}
        with self._lock:
            surging = set(self.surging.get(deployment.key, ()))
        wanted |= {url for url in surging if url != leaving}
        for url in sorted(wanted - set(listed)):
            if probes.add_worker(router, url):  # queued by the router: wait until it serves it
                serves = functools.partial(probes.serves, router, url)
                probes.wait_until(serves, 10, abort=self.stopping)
                self.report.count("router-add")
        for url, worker in sorted(listed.items()):
            if url not in wanted and probes.remove_worker(router, worker):
                self.report.count("router-remove")

    def _drain(self, deployment: DesiredDeployment | None, action: Action) -> None:
        """Out of the router, then wait until its in-flight requests finish (or grace)."""
        if deployment is None or action.desired is None:
            return
        unit = action.desired.unit
        self._sync_router(deployment, leaving=probes.base_url(unit))
        probes.wait_until(
            lambda: (probes.in_flight(unit) or 0) == 0,
            self.options.drain_grace,
            interval=0.1,
            abort=self.stopping,
        )

    # --- roll and trim -------------------------------------------------------------------

    def _roll(self, actions: list[Action], deployments: Sequence[DesiredDeployment]) -> None:
        """Deployments roll side by side; each one's replaces in the plan's order, the
        roll of a deployment ending at its first failure."""
        by_key = {d.key: d for d in deployments}
        rolls: dict[tuple[str, str, str], list[Action]] = {}
        for action in actions:
            rolls.setdefault((action.release, action.stage, action.fleet), []).append(action)

        def roll(key: tuple[str, str, str]) -> None:
            for action in rolls[key]:
                if self.stopping() or not self._replace(action, by_key.get(key)):
                    return

        self._each(roll, list(rolls), lambda key: key[2])

    def _replace(self, action: Action, deployment: DesiredDeployment | None) -> bool:
        assert action.running is not None and action.desired is not None
        changed = ", ".join(c.name or c.field for c in action.changes) or "spec"
        self._tell(f"~ replace {action.unit} on {action.host} ({changed})")
        surge = self._surge(action, deployment) if action.surge else None
        if surge is None and self.stopping():
            return False
        if surge is None and action.role != "router" and self._unavailable_forbidden():
            self.report.error(
                f"{action.unit}: no free GPUs for a surge replica and the gates policy allows "
                f"no replica to be unavailable (max_unavailable: 0); not replaced"
            )
            return False
        try:
            return not self.stopping() and self._replace_in_place(action, deployment)
        finally:
            if surge is not None:
                self._retire_surge(action, deployment, *surge)

    def _unavailable_forbidden(self) -> bool:
        return self.repo.policies.gates.max_unavailable == 0

    def _surge(
        self, action: Action, deployment: DesiredDeployment | None
    ) -> tuple[Unit, str] | None:
        """A replica of the new spec beside the old one, on free GPUs and a free port, in the
        router before the old one leaves it: capacity never drops during the roll. None
        when it cannot be placed (then the roll is one replica at a time)."""
        assert action.desired is not None
        if action.desired.replica_gpus != len(action.desired.unit.gpu_indices):
            return None  # a multi-node replica moves as a whole or not at all
        if deployment is None:
            return None
        surge = self._hold_surge(action)
        if surge is None:
            return None
        surge_id = f"{action.unit}~surge"
        self._guard(surge_id, lambda: self._stop(action.fleet, action.host, surge_id))  # left over
        payload = {**launch_payload(surge, surge_id), "labels": dict(action.desired.labels)}
        self._tell(f"+ surge {surge_id} on {action.host} (GPUs {surge.gpu_indices})")
        driver = self.driver(action.fleet)
        if not self._guard(surge_id, lambda: driver.launch(action.host, payload)):
            return None  # it may run: its GPUs stay held for this pass
        if not self._wait_unit(action.fleet, action.host, surge_id, surge):
            if self._guard(surge_id, lambda: self._stop(action.fleet, action.host, surge_id)):
                self._release_surge(action, surge)
            return None
        url = probes.base_url(surge)
        if url is not None:
            with self._lock:
                self.surging.setdefault(deployment.key, set()).add(url)
            self._sync_router(deployment)
        fault_point("roll-surged")
        return surge, surge_id

    def _hold_surge(self, action: Action) -> Unit | None:
        """The surge replica, on GPUs and a port that no other surge of this pass holds
        (deployments roll side by side); they are held until it stops."""
        assert action.desired is not None
        where = (action.fleet, action.host)
        with self._lock:
            free = set(self._free_gpus(action)) - self._surge_gpus.get(where, set())
            ports = self._ports(action) | self._surge_ports.get(where, set())
            surge = surge_unit(action.desired.unit, free, ports)
            if surge is not None and surge.port is not None:
                self._surge_gpus.setdefault(where, set()).update(surge.gpu_indices)
                self._surge_ports.setdefault(where, set()).add(surge.port)
        return surge

    def _release_surge(self, action: Action, surge: Unit) -> None:
        where = (action.fleet, action.host)
        with self._lock:
            self._surge_gpus.get(where, set()).difference_update(surge.gpu_indices)
            self._surge_ports.get(where, set()).discard(surge.port or 0)

    def _retire_surge(
        self, action: Action, deployment: DesiredDeployment | None, surge: Unit, surge_id: str
    ) -> None:
        url = probes.base_url(surge)
        if deployment is not None:
            with self._lock:
                self.surging.get(deployment.key, set()).discard(url or "")
            self._sync_router(deployment)
        drained = probes.wait_until(
            lambda: (probes.in_flight(surge) or 0) == 0,
            self.options.drain_grace,
            interval=0.1,
            abort=self.stopping,
        )
        if not drained and self.stopping():
            self._left(surge_id, "out of its router, still draining")  # the next pass stops it
            return
        if self._guard(surge_id, lambda: self._stop(action.fleet, action.host, surge_id)):
            self._release_surge(action, surge)

    def _free_gpus(self, action: Action) -> list[int]:
        """GPUs of the action's host that nothing uses now or after this pass (and that are
        not kept for trials)."""
        seen = self.observations.get(action.fleet)
        if seen is None or action.host not in seen.hosts:
            return []
        fleet = self.repo.fleets[action.fleet]
        states = declared_states(fleet)
        trial = trial_gpus(fleet, states).get(action.host, set())
        free = set(seen.free_gpus(action.host, trial))
        return sorted(free - self._desired_gpus.get((action.fleet, action.host), set()))

    def _ports(self, action: Action) -> set[int]:
        seen = self.observations.get(action.fleet)
        host = seen.hosts.get(action.host) if seen is not None else None
        used = {u.port for u in host.units if u.port} if host is not None else set()
        return used | self._desired_ports.get((action.fleet, action.host), set())

    def _replace_in_place(self, action: Action, deployment: DesiredDeployment | None) -> bool:
        assert action.running is not None and action.desired is not None
        if action.role != "router":
            self._drain(deployment, action)
            fault_point("roll-drained")
        if self.stopping():
            self._left(action.unit, "drained, not replaced")  # back in its router after _roll
            return False
        if not self._guard(action.unit, lambda: self._stop(action.fleet, action.host, action.unit)):
            return False
        fault_point("roll-stopped")
        if self._guard(action.unit, lambda: self._launch(action)) and self._wait_ready(action):
            fault_point("roll-started")
            if deployment is not None:
                self._sync_router(deployment)
            self.report.count("replace")
            return True
        if self.stopping():
            self._left(action.unit, "started on the new spec, not ready yet")
            return False
        self.report.error(
            f"{action.unit} on {action.host}: the new spec did not become ready; "
            f"put back on the previous one"
        )
        self._guard(action.unit, lambda: self._stop(action.fleet, action.host, action.unit))
        running, unit = action.running, action.desired.unit  # same address and port as before
        if self._guard(action.unit, lambda: self._relaunch(action.fleet, action.host, running)):
            ready = functools.partial(probes.is_ready, unit)
            probes.wait_until(ready, self.options.ready_timeout, abort=self.stopping)
            if deployment is not None:
                self._sync_router(deployment)
        return False


def _key(action: Action) -> DeploymentKey:
    return action.release, action.stage, action.fleet


def _fleet(action: Action) -> str:
    return action.fleet
