"""Adapter: what `denv status` and `denv rollout status` show, gathered once for both and for
`denv ui` (one source of truth): git's head, the fleets as observed, the plan's drift per
release, stage and fleet (elastic ones at the count the bot keeps), the bot's notes (parity,
its last pass, its scaling decisions), hosts that did not answer, rollback overrides in force,
and each release's stages as `rollout status` words them."""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reconciler.errors import UsageError
from reconciler.fleet.drivers.registry import Drivers
from reconciler.reconcile import probes
from reconciler.reconcile.desired import Counts, Desired, asked_counts
from reconciler.reconcile.loop import planned_fleets
from reconciler.reconcile.plan import ActionKind
from reconciler.reconcile.pool import POOL
from reconciler.reconcile.reach import FleetReach, Streaks, dump, earliest, parse, track
from reconciler.reconcile.render import queued as queued_action
from reconciler.reconcile.revisions import Stages
from reconciler.reconcile.snapshot import Snapshot, snapshot
from reconciler.reconcile.source import GitSource
from reconciler.rollout.kept import bot_checks, fleet_notes, release_fleets
from reconciler.rollout.revisions import Revisions, adjust_stages
from reconciler.rollout.scaled import (
    kept_counts,
    kept_scaling,
    scale_events,
    scale_line,
    scaling_of,
)
from reconciler.rollout.state import RolloutState
from reconciler.rollout.status import (
    Override,
    StageStatus,
    Unrecorded,
    fleet_state,
    overrides,
    rollout_status,
)
from reconciler.spec.repo import Repo


@dataclass
class Overview:
    """One look at every release, stage and fleet."""

    snap: Snapshot
    rows: list[dict[str, Any]]  # one per release, stage and fleet (`denv status --json`)
    notes: dict[str, Any]  # fleet -> the bot's note with its lease (None: no bot ran there)
    reach: dict[str, FleetReach]
    overrides: list[Override]
    at: float
    rollout: RolloutState | None = None  # the bot's kept rollout state, where found
    rollout_why: str = ""  # why it was not found
    stages: dict[str, list[StageStatus]] = field(default_factory=dict)  # release -> stages

    @property
    def head(self) -> str:
        return self.snap.head

    @property
    def repo(self) -> Repo:
        return self.snap.repo

    def parity(self) -> dict[str, Any]:
        """'release/stage' -> deploy-time parity, from the bots' notes."""
        return {k: v for n in self.notes.values() for k, v in parity_of(n).items()}

    def state_of(self, release: str, stage: str, fleet: str) -> str:
        """The stage's state on `fleet` (`fleet_state`), as `denv status` and the UI show it;
        needs the look's stages."""
        found = next((s for s in self.stages.get(release, []) if s.stage == stage), None)
        words = found.state if found is not None else Unrecorded.NOT_DEPLOYED.value
        if f"release:{release}" in self.repo.held:
            words = Unrecorded.HELD.value  # what runs is left as it runs (docs/files.md)
        row = next(
            (
                r
                for r in self.rows
                if (r["release"], r["stage"], r["fleet"]) == (release, stage, fleet)
            ),
            None,
        )
        return fleet_state(words, row["drift"] if row else None, self.notes.get(fleet) is not None)

    def scale_events(self) -> list[dict[str, Any]]:
        """Every scaling decision the bots' notes keep, oldest first (`denv status --events`)."""
        return scale_events(self.notes.values())

    def as_json(self) -> dict[str, Any]:
        """What `denv status --json` prints."""
        return {
            "head": self.head,
            "deployments": self.rows,
            "bot": self.notes,
            "parity": self.parity(),
            "overrides": [o.model_dump(mode="json") for o in self.overrides],
            "invalid_files": list(self.snap.plan.invalid_files),
            "orphans": [o.model_dump(mode="json") for o in self.snap.plan.orphans],
            "unreachable": {
                fleet: {
                    "whole": r.whole,
                    "since": r.since,
                    "hosts": {h: u.model_dump() for h, u in r.unreached.items()},
                }
                for fleet, r in self.reach.items()
            },
        }


def look(source: GitSource, drivers: Drivers, stages: bool = False) -> Overview:
    """Observe the fleets as the bot runs them (a rollback override in force shows as what
    runs, not as drift) and plan; with `stages`, each release's stages in `rollout status`
    words as well."""
    rolled: list[Override] = []
    kept: list[tuple[dict[str, Any] | None, str]] = []

    def as_the_bot_runs(named: Stages) -> Stages:
        """The bot's `adjust` hook with the state it keeps."""
        loaded = source.repo_at(named.head)
        checks, why = bot_checks(loaded, release_fleets(loaded), drivers)
        kept.append((checks, why))
        if not checks:
            return named
        adjusted = adjust_stages(Revisions(source), named, checks)
        state = RolloutState.model_validate(checks.get("rollout") or {})
        rolled.extend(overrides(named, adjusted, state))
        return adjusted

    def as_the_bot_counts(desired: Desired, observations: object) -> Counts:
        """The bot's `scale` hook, as it last decided: elastic deployments at its counts."""
        counts = kept_counts(kept[0][0] if kept else None)
        return {key: counts[key] for key in asked_counts(desired) if key in counts}

    snap = snapshot(source, drivers, adjust=as_the_bot_runs, scale=as_the_bot_counts)
    notes = fleet_notes(snap.repo, planned_fleets(snap), drivers)
    now = time.time()
    reach = _reach(snap, notes, source.label, now)
    rows = _rows(snap, reach, kept_scaling(notes.values()))
    found = Overview(snap, rows, notes, reach, rolled, now)
    checks, why = kept[0] if kept else (None, "no bot has run the stages yet")
    found.rollout = RolloutState.model_validate(checks["rollout"]) if checks else None
    found.rollout_why = why
    if stages:
        revisions = Revisions(source)
        for name, spec in sorted(snap.repo.releases.items()):
            first = revisions.of_stage(snap.head, name, 0, None)
            pins = snap.repo.promotions.get(name)
            found.stages[name] = rollout_status(name, spec, pins, found.rollout, now, first)
        for row in found.rows:
            row["state"] = found.state_of(row["release"], row["stage"], row["fleet"])
    return found


def release_stages(
    source: GitSource, release: str, drivers: Drivers
) -> tuple[Repo, str, list[StageStatus], RolloutState | None, str]:
    """`denv rollout status`: (the head's repo, the head, its stages, the bot's kept state,
    why it was not found) without observing the fleets."""
    source.sync()
    head = source.resolve()
    loaded = source.repo_at(head)
    spec = loaded.releases.get(release)
    if held := loaded.held.get(f"release:{release}"):
        problems = "\n".join(str(problem) for problem in held)
        raise UsageError(f"release {release} is held: an invalid file\n{problems}")
    if spec is None:
        raise UsageError(f"no release '{release}' (known: {', '.join(sorted(loaded.releases))})")
    checks, why = bot_checks(loaded, release_fleets(loaded, release), drivers)
    kept = RolloutState.model_validate(checks["rollout"]) if checks else None
    first = Revisions(source).of_stage(head, release, 0, None)
    rows = rollout_status(release, spec, loaded.promotions.get(release), kept, time.time(), first)
    return loaded, head, rows, kept, why


def scaling_history(source: GitSource, drivers: Drivers) -> tuple[str, list[dict[str, Any]]]:
    """`denv status --events`: (the head, every scaling decision the bots' notes on the
    releases' fleets keep, oldest first), without observing the fleets."""
    source.sync()
    head = source.resolve()
    loaded = source.repo_at(head)
    return head, scale_events(fleet_notes(loaded, release_fleets(loaded), drivers).values())


def parity_of(note: dict[str, Any] | None) -> dict[str, Any]:
    """'release/stage' -> deploy-time parity, from a bot's note."""
    found: dict[str, Any] = ((note or {}).get("checks") or {}).get("parity") or {}
    return found


def status_lines(seen: Overview) -> list[str]:
    """What `denv status` says under its table: unreachable fleets, errors, queued jobs,
    overrides, parity and the bot's last pass per fleet."""
    now = seen.at
    lines = [f"invalid file: {line}" for line in seen.snap.plan.invalid_files]
    lines += [found.text(now) for found in seen.reach.values()]
    for row in seen.rows:
        if row["error"]:
            lines.append(f"{row['release']}/{row['stage']} on {row['fleet']}: {row['error']}")
        for unit, why in sorted(row["queued"].items()):
            lines.append(f"{unit} on {row['fleet']}: pending in the queue ({why})")
        if (scaled := scale_line(row)) is not None:
            lines.append(scaled)
    lines += [override.text() for override in seen.overrides]
    lines += [orphan.text() for orphan in seen.snap.plan.orphans]
    lines += [parity_line(key, found) for key, found in sorted(seen.parity().items())]
    for fleet, note in sorted(seen.notes.items()):
        if note is None:
            lines.append(f"{fleet}: {Unrecorded.WAITING}: no reconciler has run here yet")
            continue
        if "error" in note:
            if fleet not in seen.reach:  # else the line above says why
                lines.append(f"{fleet}: the bot's note was not read: {note['error']}")
            continue
        lines.append(f"{fleet}: last pass {now - note['at']:.0f}s ago: {note['summary']}")
    return lines


def parity_line(key: str, found: dict[str, Any]) -> str:
    """One stage's deploy-time parity, as `denv status` shows it."""
    if found["state"] == "waiting":
        return f"{key}: parity waits until every fleet of the stage is ready"
    if found["state"] == "error":
        return f"{key}: DEGRADED: parity could not run: {found['error']}"
    line = f"{key}: {found['verdict']} against {found['reference']}"
    if found["degraded"]:
        line = f"{key}: DEGRADED (no promotion): {found['verdict']}; failing: " + ", ".join(
            found["failing"]
        )
    return line


def ready_text(row: dict[str, Any]) -> str:
    """READY: '2/2'; an elastic deployment's with git's bounds and what is pending,
    '3/4 (1–8)', '0/3 (1–8) +1 pending'."""
    if row["ready"] is None:
        return "?"
    text = f"{row['ready']}/{row['replicas']}"
    if row["bounds"] is not None:
        text += f" ({row['bounds']['min']}–{row['bounds']['max']})"
    return text + (f" +{row['pending_replicas']} pending" if row["pending_replicas"] else "")


def drift_text(row: dict[str, Any]) -> str:
    if row["drift"] is None:
        return "unknown: unreachable"
    drift = row["drift"] or "none"
    down = len(row["unreachable_hosts"])
    return drift + (f" ({down} host{'s' * (down > 1)} unreachable)" if down else "")


def _rows(
    snap: Snapshot, reach: dict[str, FleetReach], scaling: dict[str, dict[str, Any]]
) -> list[dict[str, Any]]:
    """One row per release, stage and fleet; on a fleet none of whose hosts answered, ready
    and drift are None (not known), with `unreachable_since`. An elastic deployment's row
    has its bounds, its count in words (`scale`), what is pending and the bot's last
    decision (`scaling`, from its note)."""
    rows = []
    deployments = {(d.release, d.stage, d.fleet): d for d in snap.desired.deployments}
    for group in snap.plan.groups:
        actions = snap.plan.group_actions(group)
        wanted = deployments.get((group.release, group.stage, group.fleet))
        readiness: dict[str, bool] = {}  # unit -> its probe passed (engines that run)
        replicas = 0
        if wanted is not None:
            heads = [u for u in wanted.units if u.unit.role != "router" and u.unit.port]
            running = {a.unit for a in actions if a.kind == ActionKind.KEEP}
            replicas = len(heads)
            readiness = {u.id: probes.is_ready(u.unit) for u in heads if u.id in running}
        ready = sum(readiness.values())
        drift = Counter(a.kind.value for a in actions if a.kind != ActionKind.KEEP)
        if queued := [a for a in actions if queued_action(a)]:
            drift["pending"] = len(queued)  # not there yet: the scheduler holds the job
        found = reach.get(group.fleet)
        # a stage's pool is decided once, for all its fleets
        fleet = POOL if group.pool_replicas is not None else group.fleet
        key = f"{group.release}/{group.stage}/{fleet}"
        whole = found is not None and found.whole
        rows.append(
            {
                "release": group.release,
                "stage": group.stage,
                "fleet": group.fleet,
                "desired_revision": group.revision,
                "running_revisions": list(group.running_revisions),
                "replicas": replicas,
                "ready": None if whole else ready,
                "readiness": readiness,
                "endpoint": group.endpoint,
                "drift": None
                if whole
                else ", ".join(f"{kind} {count}" for kind, count in sorted(drift.items())),
                "error": group.error,
                # jobs the scheduler has not started (a Slurm fleet), with its reason
                "queued": {a.unit: a.reason.removeprefix("pending: ") for a in queued},
                "unreachable_hosts": sorted(found.unreached) if found is not None else [],
                "unreachable_since": found.since if whole and found is not None else None,
                "bounds": group.bounds.model_dump() if group.bounds is not None else None,
                "pending_replicas": group.pending_replicas,
                "pool_replicas": group.pool_replicas,
                "scale": group.scale,
                "scaling": scaling_of(scaling.get(key)) if group.bounds is not None else None,
            }
        )
    return rows


def _reach(snap: Snapshot, notes: dict[str, Any], label: str, now: float) -> dict[str, FleetReach]:
    """The fleets with hosts that did not answer this look, each host since the first failed
    observation of its streak: the earliest the bot's notes (from the fleets that answered)
    or this machine's earlier looks recorded. This machine's record is kept in the state
    folder, per repository."""
    path = _reach_file()
    try:
        kept = json.loads(path.read_text())
    except (OSError, ValueError):
        kept = {}
    kept = kept if isinstance(kept, dict) else {}
    mine = track(parse(kept.get(label)), snap.unreached(), snap.observations, now)
    noted: list[Streaks] = [parse((n or {}).get("unreachable")) for n in notes.values()]
    merged = earliest(mine, *noted)
    wanted = {k: v for k, v in kept.items() if k != label} | (
        {label: dump(merged)} if merged else {}
    )
    if wanted != kept:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(wanted, indent=2) + "\n")
        except OSError:
            pass  # a read-only home: the streak starts again at the next look
    return {
        fleet: FleetReach(fleet=fleet, hosts=len(snap.repo.fleets[fleet].hosts), unreached=hosts)
        for fleet, hosts in merged.items()
        if fleet in snap.repo.fleets
    }


def _reach_file() -> Path:
    """This machine's record of hosts `denv status` found unreachable, and since when."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "denv" / "unreachable.json"
