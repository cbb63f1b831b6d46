"""Adapter: the reconcile loop — each pass reads git, observes, plans and applies; level-
triggered, so a pass that was interrupted is simply followed by the next one.

One reconciler at a time per fleet: before it changes anything, a pass takes (or renews) the
lease of every fleet it plans for, kept by the agent of the fleet's first host; a lease that
is not renewed expires after `lease_ttl`. The pass's summary is written with the lease (its
`note`), so `denv status` can show the last error from anywhere.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from reconciler.errors import DenvError, failure
from reconciler.fleet.drivers.base import FleetDriver
from reconciler.fleet.drivers.registry import Drivers
from reconciler.fleet.model.answers import LeaseAnswer
from reconciler.fleet.model.observed import FleetObservation
from reconciler.reconcile.apply import Applier, ApplyOptions, ApplyReport
from reconciler.reconcile.desired import Counts, Desired, DesiredMemo
from reconciler.reconcile.plan import ActionKind, Plan
from reconciler.reconcile.reach import Streaks, dump, parse, track
from reconciler.reconcile.revisions import Stages
from reconciler.reconcile.routers_seen import RoutersSeen, with_desired
from reconciler.reconcile.routers_seen import dump as dump_routers
from reconciler.reconcile.snapshot import LEASE, Snapshot, snapshot
from reconciler.reconcile.source import GitSource
from reconciler.spec.repo import Repo

# After each pass: (the snapshot, the last results) -> results, kept with the pass's note.
Checks = Callable[[Snapshot, dict[str, Any]], dict[str, Any]]
# Before each plan: (the stages git says, the last results) -> the stages to run.
Adjust = Callable[[Stages, dict[str, Any]], Stages]
# Before each plan: (the desired state at the counts that run, the observations, the last
# results) -> the replica count of each elastic deployment (the autoscaler).
Scale = Callable[[Desired, dict[str, FleetObservation], dict[str, Any]], Counts]
DEFAULTS = ApplyOptions()


class LeaseHeld(DenvError):
    """Another reconciler holds a fleet's lease."""


def default_holder() -> str:
    return f"{socket.gethostname()}/{os.getpid()}"


@dataclass
class BotMetrics:
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    def __post_init__(self) -> None:
        self.passes = Histogram(
            "denv_reconcile_pass_seconds", "Duration of a reconcile pass", registry=self.registry
        )
        self.actions = Counter(
            "denv_reconcile_actions", "Actions applied", ["kind"], registry=self.registry
        )
        self.errors = Counter("denv_reconcile_errors", "Errors in passes", registry=self.registry)
        self.drift = Gauge(
            "denv_reconcile_drift_actions",
            "Actions the last plan needed (0: the fleets match git)",
            registry=self.registry,
        )


@dataclass
class PassResult:
    head: str
    plan: Plan
    report: ApplyReport
    seconds: float
    # of them, from the plan the pass acts on (its decision) until apply ended (every started
    # replica serving, or given up on)
    apply_seconds: float = 0.0

    def summary(self) -> str:
        counts = self.plan.counts
        done = ", ".join(f"{k} {v}" for k, v in sorted(self.report.done.items())) or "nothing"
        line = (
            f"{self.head[:12]}: planned +{counts['start']} ~{counts['replace']} "
            f"-{counts['stop']} ={counts['keep']}; done: {done}; {self.seconds:.1f}s"
        )
        if self.report.errors:
            line += f"; {len(self.report.errors)} error(s): {self.report.errors[0]}"
        if self.report.waiting:
            line += f"; waiting: {self.report.waiting[0]}"
        if unplanned := self.plan.errors:  # left as they run: said, never silent
            first = unplanned[0]
            line += f"; not planned: {first.where}{f' on {first.fleet}' if first.fleet else ''}"
            line += f": {first.message}" + (
                f" (+{len(unplanned) - 1} more)" if len(unplanned) > 1 else ""
            )
        if self.report.resubmitted:
            line += "; resubmitted: " + ", ".join(self.report.resubmitted)
        if left := self.plan.left:
            line += f"; {left[0].text()}"
            line += f" (+{len(left) - 1} more)" if len(left) > 1 else ""
        return line


def planned_fleets(snap: Snapshot) -> list[str]:
    return sorted(
        {f.fleet for f in snap.plan.fleets if f.fleet in snap.repo.fleets}
        | {a.fleet for a in snap.plan.actions}
    )


def _unreached(snap: Snapshot, said: set[str]) -> list[str]:
    """One error per host of a stage's fleet that did not answer (what runs there is not
    known), but for the fleets whose error is said already (`said`) and unreadable records
    (`Snapshot.unreadable` names their file)."""
    return [
        f"fleet {name}: {host} not reached ({seen.cause_text(host)}): what runs there is not known"
        for name in sorted({f.fleet for f in snap.plan.fleets} - said)
        if (seen := snap.observations.get(name)) is not None
        for host in sorted(seen.errors)
        if host not in seen.unreadable
    ]


class Reconciler:
    def __init__(
        self,
        source: GitSource,
        options: ApplyOptions = DEFAULTS,
        holder: str | None = None,
        lease_ttl: float = 60.0,
        say: Callable[[str], None] = lambda message: None,
        metrics: BotMetrics | None = None,
        checks: Checks | None = None,
        adjust: Adjust | None = None,
        clock: Callable[[], float] = time.time,
        scale: Scale | None = None,
    ) -> None:
        self.source = source
        self.clock = clock
        self.options = options
        self.holder = holder or default_holder()
        self.lease_ttl = lease_ttl
        self.say = say
        self.metrics = metrics or BotMetrics()
        self.drivers = Drivers(warn=say)  # connections are kept across passes
        # the leases' own connections: renewed from a thread while apply waits on readiness
        self.lease_drivers = Drivers(warn=say)
        self.memo = DesiredMemo()  # each deployment as last resolved: a steady pass compares
        self.stop_requested = threading.Event()
        self._held: dict[str, float] = {}  # fleet -> when we last renewed
        self._repo: Repo | None = None  # the last head read: where the leases are
        self.checks = checks  # after apply, e.g. deploy-time parity (a layer above ours)
        self._checked: dict[str, Any] = {}  # the last checks' results, kept with the leases
        self.adjust = adjust  # e.g. a rollback not yet merged (a layer above ours)
        self.scale = scale  # the autoscaler of elastic stages (a layer above ours)
        # hosts that did not answer, since when (reach.py); None until the first pass, which
        # continues the streaks of the newest note it reads with the leases
        self._reach: Streaks | None = None
        self._noted: list[tuple[float, Streaks]] = []  # (note's time, its streaks)
        self._routers: RoutersSeen | None = None  # None: read from the notes when needed

    def close(self) -> None:
        """Give the leases back (the next bot need not wait for them to expire) and hang up."""
        if self._repo is not None:
            self.release(self._repo)
        self.drivers.close()
        self.lease_drivers.close()

    def _lease_driver(self, repo: Repo, fleet: str) -> FleetDriver:
        found = repo.fleets.get(fleet)
        if found is None:  # its file is invalid (held) or gone since we took the lease
            raise DenvError(f"fleet {fleet} is not in the revision read: its lease expires")
        return self.lease_drivers.get(found)

    def _take(self, repo: Repo, fleets: list[str], note: Any = None) -> dict[str, str]:
        """Take or renew every fleet's lease; the fleets this pass leaves alone, with why: their
        lease host did not answer, or another bot holds the lease (their actions wait for a
        pass that holds it). What one fleet's lease host says never stops the others. Raises
        LeaseHeld when another bot holds a lease and this pass holds none."""
        skipped: dict[str, str] = {}
        held_elsewhere: list[str] = []
        for fleet in fleets:
            try:
                answer = self._lease(repo, fleet, note)
            except Exception as exc:  # a host's answer, or a bug: this fleet only
                skipped[fleet] = f"fleet {fleet}: no lease, nothing done: {failure(exc)}"
                self._held.pop(fleet, None)
                continue
            if not answer.held:
                skipped[fleet] = (
                    f"fleet {fleet} is being reconciled by {answer.holder} (lease for "
                    f"{answer.left():.0f}s more); one reconciler at a time per fleet"
                )
                held_elsewhere.append(fleet)
                self._held.pop(fleet, None)
                self.drivers.fences.pop(fleet, None)  # it acts there no more; reads go on
                continue
            self._held[fleet] = time.monotonic()
            if answer.epoch is not None:  # every call to the fleet's agents carries it
                self.drivers.fences[fleet] = f"{fleet}:{answer.epoch}"
        if held_elsewhere and len(skipped) == len(fleets):
            raise LeaseHeld("; ".join(skipped[fleet] for fleet in held_elsewhere))
        return skipped

    def _lease(self, repo: Repo, fleet: str, note: Any) -> LeaseAnswer:
        """Take or renew one fleet's lease; what the last bot noted is read on the way."""
        driver = self._lease_driver(repo, fleet)
        answer = driver.lease(LEASE, self.holder, self.lease_ttl, note=note)
        noted = answer.note
        if noted and not self._checked:  # what the last bot found
            self._checked = dict(noted.get("checks") or {})
        if noted and self._reach is None:
            self._noted.append((noted.get("at") or 0, parse(noted.get("unreachable"))))
        if not answer.held and self._dead_here(answer.holder or ""):
            driver.lease(LEASE, answer.holder or "", 0, release=True)  # a killed bot of ours
            answer = driver.lease(LEASE, self.holder, self.lease_ttl, note=note)
        return answer

    @staticmethod
    def _dead_here(holder: str) -> bool:
        """The holder was a reconciler on this machine whose process is gone."""
        host, _, pid = holder.rpartition("/")
        if host != socket.gethostname() or not pid.isdigit():
            return False
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return False

    def _keep_leases(self, repo: Repo, done: threading.Event, lost: dict[str, str]) -> None:
        """Renew every lease a third of its time to live, until apply is done: a readiness
        wait of many minutes never lets another bot in. A lease that another bot holds now,
        or that went unrenewed for its whole time to live, is `lost`: the pass does nothing
        more on that fleet (steps/context.py fences its verbs)."""
        ours = sorted(self._held)
        while not done.wait(self.lease_ttl / 3):
            for fleet in (f for f in ours if f not in lost):
                try:
                    answer = self._lease(repo, fleet, None)
                except Exception as exc:  # not renewed: ours until it expires, then lost
                    renewed = self._held.get(fleet, 0.0)
                    if time.monotonic() - renewed >= self.lease_ttl:
                        lost[fleet] = f"its lease expired unrenewed ({failure(exc)})"
                else:
                    if answer.held:
                        self._held[fleet] = time.monotonic()
                    else:
                        lost[fleet] = f"its lease went to {answer.holder}"
                if fleet in lost:
                    self._held.pop(fleet, None)
                    self.say(f"fleet {fleet}: {lost[fleet]}: the pass does nothing more there")

    def release(self, repo: Repo) -> None:
        for fleet in sorted(self._held):
            with contextlib.suppress(DenvError):  # else it expires by itself
                self._lease_driver(repo, fleet).lease(LEASE, self.holder, 0, release=True)
        self._held.clear()

    def _adjusted(self, stages: Stages) -> Stages:
        return stages if self.adjust is None else self.adjust(stages, self._checked)

    def run_pass(self, rev: str | None = None) -> PassResult:
        started = time.monotonic()
        # the autoscaler decides only while its fleets are ours (what it kept: with the lease)
        scaled = bool(self._held)
        snap = self._snapshot(rev, scaled)
        fleets = planned_fleets(snap)
        self._repo = snap.repo
        fresh = [f for f in fleets if f not in self._held]
        skipped = self._take(snap.repo, fleets)
        if set(fresh) - set(skipped) or (self.scale is not None and not scaled):
            # what runs, now that it is ours (and what the last bot kept, read with the lease)
            snap = self._snapshot(rev, True)
        actions = tuple(a for a in snap.plan.actions if a.fleet not in skipped)
        deployments = [d for d in snap.desired.deployments if d.fleet not in skipped]
        lost: dict[str, str] = {}  # fleet -> why its lease is no longer this pass's
        applier = Applier(
            snap.repo,
            self.drivers,
            self.options,
            say=self.say,
            stopping=self.stop_requested.is_set,
            lost=lost,
        )
        chosen = snap.plan.model_copy(update={"actions": actions})
        applied = threading.Event()
        renewing = threading.Thread(target=self._keep_leases, args=(snap.repo, applied, lost))
        renewing.start()
        decided = time.monotonic()
        try:
            report = applier.apply(chosen, deployments, snap.observations)
        finally:
            applied.set()
            renewing.join()
        applying = time.monotonic() - decided
        # invalid files on the default branch: what they hold waits, the rest went on
        report.errors += list(snap.plan.invalid_files) + list(skipped.values())
        report.errors += [f"fleet {f}: {why} during the pass" for f, why in sorted(lost.items())]
        report.errors += snap.unreadable()
        report.errors += _unreached(snap, set(skipped) | set(lost))
        self._reach = self._track(snap)
        self._routers = with_desired(snap.routers, snap.desired.deployments)
        if self.checks is not None and not self.stop_requested.is_set():
            self._checked = self.checks(snap, self._checked)
        result = PassResult(snap.head, snap.plan, report, time.monotonic() - started, applying)
        note = {
            "head": snap.head,
            "at": self.clock(),
            "errors": report.errors + [e.message for e in snap.plan.errors],
            "waiting": report.waiting,
            "resubmitted": report.resubmitted,
            "summary": result.summary(),
            "checks": self._checked,
            "unreachable": dump(self._reach),
            "routers": dump_routers(self._routers),
        }
        self._take(snap.repo, [f for f in fleets if f not in skipped and f not in lost], note=note)
        self._count(result)
        return result

    def _snapshot(self, rev: str | None, scaled: bool) -> Snapshot:
        return snapshot(
            self.source,
            self.drivers,
            rev,
            adjust=self._adjusted,
            memo=self.memo,
            scale=self._scaled if self.scale is not None and scaled else None,
            routers=self._routers,
        )

    def _scaled(self, desired: Desired, observations: Mapping[str, FleetObservation]) -> Counts:
        assert self.scale is not None
        return self.scale(desired, dict(observations), self._checked)

    def _track(self, snap: Snapshot) -> Streaks:
        """This pass's streaks of hosts that did not answer, continuing the last pass's (or,
        on a bot's first pass, those of the newest note it read)."""
        if self._reach is not None:
            previous = self._reach
        else:
            previous = max(self._noted, key=lambda noted: noted[0], default=(0, {}))[1]
        return track(previous, snap.unreached(), snap.observations, self.clock())

    def _count(self, result: PassResult) -> None:
        self.metrics.passes.observe(result.seconds)
        for kind, count in result.report.done.items():
            self.metrics.actions.labels(kind=kind).inc(count)
        self.metrics.errors.inc(len(result.report.errors))
        self.metrics.drift.set(sum(1 for a in result.plan.actions if a.kind != ActionKind.KEEP))

    def loop(self, interval: float, once: bool, on_pass: Callable[[PassResult], None]) -> int:
        """Passes every `interval` until SIGTERM (`stop_requested`), or one with `once`; the
        number of errors of the last pass. Every fleet leased by another bot: `once` exits with
        the message, the loop waits for the leases; some: the others are reconciled."""
        failures = 0
        while not self.stop_requested.is_set():
            try:
                result = self.run_pass()
                on_pass(result)
                failures = len(result.report.errors)
            except DenvError as exc:
                self.metrics.errors.inc()
                self.say(f"pass failed: {exc}")
                failures += 1
                if once:
                    raise
            if once:
                break
            self.stop_requested.wait(interval)
        return failures
