"""Pure logic, with one adapter edge at the bottom: which process owns a trial, and the
trials a fleet's agents report grouped with their owners' state.

Every trial unit carries `owner: <hostname>/<pid>/<start>`, the process that deployed it and
tears it down; <start> is that process's start time (field 22 of /proc/<pid>/stat, clock
ticks since boot), so a pid the kernel has since given to another process is not taken for
the owner. Only a process on this machine can be checked: an owner elsewhere (a CI runner)
is reported as such, never judged gone.
"""

from __future__ import annotations

import errno
import os
import socket
from collections.abc import Callable, Iterable
from enum import StrEnum

from reconciler.fleet.model.observed import FleetObservation, UnitRecord
from reconciler.spec.base import Spec

OWNER_LABEL = "owner"
RELEASE_LABELS = ("release", "stage", "fleet")  # a release's unit: never a trial's


class OwnerState(StrEnum):
    ALIVE = "alive"  # the owning process runs on this machine
    GONE = "gone"  # it ran on this machine and no longer does: its trial is abandoned
    ELSEWHERE = "elsewhere"  # another machine's process: this one cannot tell
    UNKNOWN = "unknown"  # no owner label (an older denv), or its process cannot be read


class Owner(Spec):
    host: str
    pid: int
    start: int  # clock ticks since boot

    @property
    def label(self) -> str:
        return f"{self.host}/{self.pid}/{self.start}"


def parse_owner(label: str | None) -> Owner | None:
    """`host/pid/start` -> Owner; None for anything else (no label, a malformed one)."""
    parts = (label or "").rsplit("/", 2)
    if len(parts) != 3 or not parts[0] or not all(p.isascii() and p.isdigit() for p in parts[1:]):
        return None
    host, pid, start = parts[0], int(parts[1]), int(parts[2])
    return Owner(host=host, pid=pid, start=start) if pid > 0 else None


def judge(owner: Owner | None, here: str, start_now: int | None) -> OwnerState:
    """The owner's state from this machine's name and the start time its pid has now
    (None: no such process). A pid with another start time is another process."""
    if owner is None:
        return OwnerState.UNKNOWN
    if owner.host != here:
        return OwnerState.ELSEWHERE
    return OwnerState.ALIVE if start_now == owner.start else OwnerState.GONE


class TrialState(StrEnum):
    RUNNING = "running"  # its owner runs
    ABANDONED = "abandoned"  # its owner's process is gone: nothing will tear it down
    ELSEWHERE = "elsewhere"  # its owner is on another machine
    UNKNOWN = "unknown"  # it has no owner label, or its owner cannot be read


WORDS = {TrialState.ELSEWHERE: "owner elsewhere", TrialState.UNKNOWN: "owner unknown"}


def state_words(state: TrialState) -> str:
    """A trial's state as `denv fleet trials` and the UI's fleets page say it."""
    return WORDS.get(state, str(state))


STATES = {
    OwnerState.ALIVE: TrialState.RUNNING,
    OwnerState.GONE: TrialState.ABANDONED,
    OwnerState.ELSEWHERE: TrialState.ELSEWHERE,
    OwnerState.UNKNOWN: TrialState.UNKNOWN,
}


class FoundUnit(Spec):
    id: str
    host: str
    role: str
    alive: bool
    gpus: list[int]


class FoundTrial(Spec):
    """One trial as the agents report it: its units across hosts, router last."""

    trial: str
    purpose: str | None
    recipe: str | None
    owner: str | None
    state: TrialState
    started_at: float | None  # the earliest unit's start (epoch seconds, the host's clock)
    units: list[FoundUnit]

    @property
    def gpus(self) -> dict[str, list[int]]:
        """host -> GPUs its running engines hold."""
        found: dict[str, list[int]] = {}
        for unit in self.units:
            if unit.alive and unit.gpus:
                found.setdefault(unit.host, []).extend(unit.gpus)
        return {host: sorted(gpus) for host, gpus in sorted(found.items())}

    def gpus_text(self) -> str:
        return " ".join(f"{h}:{','.join(map(str, g))}" for h, g in self.gpus.items()) or "none"


def _is_trial_unit(record: UnitRecord) -> bool:
    labels = record.labels
    return bool(labels.get("trial")) and not any(k in labels for k in RELEASE_LABELS)


def found_trials(
    observation: FleetObservation, owner_state: Callable[[str | None], OwnerState]
) -> list[FoundTrial]:
    """The trials on the observed hosts, oldest first; `owner_state` judges an owner label
    (it reads /proc: passed in, so this stays pure)."""
    records: dict[str, list[tuple[str, UnitRecord]]] = {}
    for host, seen in sorted(observation.hosts.items()):
        for record in seen.units:
            if _is_trial_unit(record):
                records.setdefault(record.labels["trial"], []).append((host, record))
    trials = [_trial(trial, found, owner_state) for trial, found in records.items()]
    return sorted(trials, key=lambda t: (t.started_at or 0.0, t.trial))


def _trial(
    trial: str,
    found: Iterable[tuple[str, UnitRecord]],
    owner_state: Callable[[str | None], OwnerState],
) -> FoundTrial:
    pairs = sorted(found, key=lambda p: (p[1].labels.get("role") == "router", p[1].id))
    labels = pairs[0][1].labels
    owner = labels.get(OWNER_LABEL)
    starts = [r.started_at for _, r in pairs if r.started_at is not None]
    return FoundTrial(
        trial=trial,
        purpose=labels.get("purpose"),
        recipe=labels.get("recipe"),
        owner=owner,
        state=STATES[owner_state(owner)],
        started_at=min(starts) if starts else None,
        units=[
            FoundUnit(
                id=r.id, host=h, role=r.labels.get("role", ""), alive=r.alive, gpus=list(r.gpus)
            )
            for h, r in pairs
        ],
    )


# --- adapter: this machine's processes -------------------------------------------------------


class ProcessUnreadable(Exception):
    """The process may exist, but its start time cannot be read (no /proc, hidden pids)."""


def process_start(pid: int) -> int | None:
    """The start time of `pid` (clock ticks since boot), None when no such process runs
    (a zombie has exited); ProcessUnreadable when this machine cannot say."""
    try:
        with open(f"/proc/{pid}/stat") as stream:
            stat = stream.read()
    except FileNotFoundError:
        if not os.path.isdir("/proc/self"):
            raise ProcessUnreadable("no /proc on this machine") from None
        try:  # /proc mounted with hidepid hides other users' processes; signal 0 does not
            os.kill(pid, 0)
        except OSError as exc:
            if exc.errno == errno.ESRCH:
                return None
        raise ProcessUnreadable(f"process {pid} is hidden") from None
    except OSError as exc:
        raise ProcessUnreadable(f"process {pid}: {exc}") from None
    fields = stat[stat.rindex(")") + 2 :].split()  # the name in () may hold spaces
    return None if fields[0] in {"Z", "X"} else int(fields[19])


def this_process() -> str | None:
    """The owner label of the running process; None where its start time cannot be read
    (no /proc): its trials are then of unknown owner, never reclaimed."""
    pid = os.getpid()
    try:
        start = process_start(pid)
    except ProcessUnreadable:
        return None
    return None if start is None else Owner(host=socket.gethostname(), pid=pid, start=start).label


def owner_state(label: str | None) -> OwnerState:
    """Whether the process an owner label names still runs (reads /proc on this machine)."""
    owner, here = parse_owner(label), socket.gethostname()
    if owner is None or owner.host != here:
        return judge(owner, here, None)
    try:
        return judge(owner, here, process_start(owner.pid))
    except ProcessUnreadable:
        return OwnerState.UNKNOWN
