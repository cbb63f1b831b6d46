"""Adapter: what the applier's steps share — the options, the report they add to, the fleets'
drivers and the verbs every step uses on them (launch, stop, wait until ready), the room the
surge replicas take, and SIGTERM.

Each step (`reconcile/steps/<step>.py`) is a function of this context and the plan's actions;
`reconcile/apply.py` runs them in order. The actions of a wave run on threads: whatever a step
changes here is under `lock`, and progress is said one whole line at a time.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from reconciler.engines.units import Unit
from reconciler.errors import DenvError, failure
from reconciler.faults import fault_point
from reconciler.fleet.drivers.base import FleetDriver
from reconciler.fleet.drivers.registry import Drivers
from reconciler.fleet.hostagent import Fenced, HostFault
from reconciler.fleet.model.labels import DeploymentKey
from reconciler.fleet.model.observed import FleetObservation, UnitRecord
from reconciler.fleet.threads import run_grouped
from reconciler.fleet.transport import HostUnreachable
from reconciler.reconcile import probes
from reconciler.reconcile.desired import DesiredDeployment
from reconciler.reconcile.plan import Action
from reconciler.spec.repo import Repo

# Seconds between asking a host's agent whether a unit waited on has exited: each ask reads
# every unit record on the host, so the units waited on at once on one host share the asks
# (16 replicas starting at once: one ask a second, not 16).
EXIT_CHECK_S = 1.0
# A job submitted to a scheduler waits for its next scheduling cycle: only after this long is
# a job the queue holds (Resources, Priority) reported as pending instead of waited for.
QUEUE_GRACE_S = 10.0


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


Where = tuple[str, str]  # (fleet, host)


@dataclass
class Room:
    """What surge replicas may not take, by (fleet, host): the GPUs and ports the desired
    units use, and those of surge replicas placed and not yet stopped (deployments roll side
    by side); and the URLs of surge replicas each deployment's router keeps meanwhile."""

    desired_gpus: dict[Where, set[int]] = field(default_factory=dict)
    desired_ports: dict[Where, set[int]] = field(default_factory=dict)
    surge_gpus: dict[Where, set[int]] = field(default_factory=dict)
    surge_ports: dict[Where, set[int]] = field(default_factory=dict)
    surging: dict[DeploymentKey, set[str]] = field(default_factory=dict)

    @classmethod
    def of(cls, deployments: Sequence[DesiredDeployment]) -> Room:
        room = cls()
        for deployment in deployments:
            for wanted in deployment.units:
                key = (wanted.fleet, wanted.host)
                room.desired_gpus.setdefault(key, set()).update(wanted.unit.gpu_indices)
                if wanted.unit.port:
                    room.desired_ports.setdefault(key, set()).add(wanted.unit.port)
        return room


def backoff(restarts: int, options: ApplyOptions) -> float:
    """Seconds to wait after an exit before the next start: none for the first crash."""
    if restarts == 0:
        return 0.0
    return float(min(options.backoff_base * 2 ** (restarts - 1), options.backoff_max))


class LeaseLost(DenvError):
    """The pass lost a fleet's lease while applying: it acts there no more."""


class HostSilent(DenvError):
    """A host left one of the pass's calls unanswered: the pass asks it nothing more."""


T = TypeVar("T")
R = TypeVar("R")


class Context:
    """One pass's apply: its fleets, its report, its room, and whether to stop."""

    def __init__(
        self,
        repo: Repo,
        drivers: Drivers,
        options: ApplyOptions,
        say: Callable[[str], None],
        requested: Callable[[], bool],
        lost: MutableMapping[str, str] | None = None,
    ) -> None:
        self.repo = repo
        # fleet -> why the pass lost its lease (another bot holds it, it expired unrenewed, or
        # an agent of the fleet refused the lease's epoch): no verb reaches such a fleet
        self.lost: MutableMapping[str, str] = lost if lost is not None else {}
        self.drivers = drivers
        self.options = options
        self.say = say
        self.requested = requested  # SIGTERM: end every wait now, start no other action
        self.report = ApplyReport()
        self.observations: Mapping[str, FleetObservation] = {}
        self.room = Room()
        self.lock = threading.Lock()  # the drivers and the room, shared by a wave's actions
        self._said = threading.Lock()
        self._asking: dict[Where, threading.Lock] = {}  # one ask for a host's units at a time
        self._records: dict[Where, tuple[float, list[UnitRecord]]] = {}  # (when asked, answer)
        # hosts whose agent did not answer a call (hung, unreachable since it was observed) or
        # that cannot write (disk full): like a host not reached at observation, nothing more
        # is asked of them this pass
        self.silent: dict[Where, str] = {}
        self._halted = threading.Event()  # the caller left a wave early (Ctrl-C, a bug)

    def stopping(self) -> bool:
        return self._halted.is_set() or self.requested()

    def tell(self, line: str) -> None:
        """One whole line of progress, whichever action's thread says it."""
        with self._said:
            self.say(line)

    def each(
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

    def guard(self, what: str, step: Callable[[], object]) -> bool:
        try:
            step()
            return True
        except HostSilent:  # the host's first unanswered call is the pass's error for it
            return False
        except Fenced as exc:  # an agent saw a newer lease epoch: the fleet is not ours
            why = "an agent refused its lease epoch (another bot took the lease)"
            self.lost.setdefault(exc.fleet, why)
            self.report.error(f"{what}: {failure(exc)}")
            return False
        except Exception as exc:  # one action's failure is its own: the others go on
            self.report.error(f"{what}: {failure(exc)}")
            return False

    def left(self, unit: str, state: str) -> None:
        """A step SIGTERM cut short: the next pass takes the unit up from where it is."""
        self.report.wait(f"{unit}: {state} at SIGTERM; the next pass resumes")

    # --- the verbs on units --------------------------------------------------------------

    def fenced(self, fleet: str) -> str | None:
        """Why the pass no longer holds the fleet's lease; None while it does."""
        return self.lost.get(fleet)

    def check_fence(self, fleet: str) -> None:
        """LeaseLost once the pass no longer holds the fleet's lease: its renewal said so, or
        an agent of the fleet refused its epoch."""
        why = self.fenced(fleet)
        if why is not None:
            raise LeaseLost(f"fleet {fleet}: {why} during the pass: nothing more is done there")

    def driver(self, fleet: str) -> FleetDriver:
        self.check_fence(fleet)
        with self.lock:  # the session's drivers are made on first use, by any action
            return self.drivers.get(self.repo.fleets[fleet])

    def left_alone(self, fleet: str, host: str) -> bool:
        """Whether a call to the host went unanswered in this pass (see `ask`)."""
        return (fleet, host) in self.silent

    def ask(self, fleet: str, host: str, call: Callable[[FleetDriver], R]) -> R:
        """`call` on the fleet's driver, about `host`. Once a call to a host got no answer,
        or found its disk full, the host is left alone for the rest of the pass (HostSilent):
        a hung agent costs the pass one call's timeout, not one per action, and a full disk
        fails one launch, never stopping a replica whose replacement cannot start."""
        where = (fleet, host)
        why = self.silent.get(where)
        if why is not None:
            raise HostSilent(f"fleet {fleet}: {host} is left alone for this pass: {why}")
        driver = self.driver(fleet)
        try:
            return call(driver)
        except (HostUnreachable, HostFault) as exc:
            with self.lock:
                self.silent.setdefault(where, failure(exc))
            raise DenvError(
                f"fleet {fleet}: {failure(exc)}; nothing more is asked of {host} in this pass"
            ) from exc

    def launch(self, action: Action) -> None:
        assert action.desired is not None
        self.start(action.fleet, action.host, action.desired.payload())
        fault_point("launched")  # the unit is submitted; nothing after it was done

    def stop(self, fleet: str, host: str, unit: str) -> None:
        grace = self.options.stop_grace
        self.ask(fleet, host, lambda driver: driver.stop(host, unit, grace=grace))

    def relaunch(self, fleet: str, host: str, record: UnitRecord) -> None:
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
        self.start(fleet, host, payload)

    def start(self, fleet: str, host: str, payload: Mapping[str, object]) -> None:
        """Launch the unit `payload` describes on the host (through `ask`)."""
        self.ask(fleet, host, lambda driver: driver.launch(host, payload))

    def records(self, fleet: str, host: str, since: float) -> list[UnitRecord]:
        """The host's unit records as its agent answered at `since` (monotonic) or later: the
        last answer when it is that recent, else a new ask, which the other waits on the same
        host meanwhile take too."""
        where = (fleet, host)
        with self.lock:
            asking = self._asking.setdefault(where, threading.Lock())
        with asking:
            asked = self._records.get(where)
            if asked is None or asked[0] < since:
                when = time.monotonic()
                asked = when, self.ask(fleet, host, lambda driver: driver.units(host))
                self._records[where] = asked
            return asked[1]

    def wait_ready(self, action: Action) -> bool:
        assert action.desired is not None
        return self.wait_unit(action.fleet, action.host, action.unit, action.desired.unit)

    def wait_unit(self, fleet: str, host: str, unit_id: str, unit: Unit) -> bool:
        """Ready within the timeout; False at once when the process exits meanwhile, or
        when SIGTERM comes."""
        asked = [0.0]  # when the agent was last asked: readiness is polled 5 times as often
        began = time.monotonic()

        def exited_or_stopping() -> bool:  # a supervised unit (a router) between two starts
            if self.stopping():  # has exited too
                return True
            now = time.monotonic()
            if now - asked[0] < EXIT_CHECK_S:
                return False
            asked[0] = now
            # a job the scheduler still holds back (Resources) after QUEUE_GRACE_S is not
            # waited for: the pass says it is pending, the next one looks again
            held_back = now - began > QUEUE_GRACE_S
            # an answer from before this wait began may show the unit's last run, exited
            recent = max(began, now - EXIT_CHECK_S / 2)
            try:
                records = self.records(fleet, host, recent)
            except DenvError:
                if self.left_alone(fleet, host):  # it stopped answering: its error says so
                    return True
                raise
            return any(
                r.id == unit_id
                and (r.exit_code is not None or not r.alive)
                and (not r.pending or (held_back and r.queue_reason is not None))
                for r in records
            )

        return probes.wait_until(
            lambda: probes.is_ready(unit), self.options.ready_timeout, abort=exited_or_stopping
        )


def deployment_key(action: Action) -> DeploymentKey:
    return action.release, action.stage, action.fleet


def fleet_of(action: Action) -> str:
    return action.fleet
