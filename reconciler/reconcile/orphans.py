"""Pure logic: orphans — units denv started (their labels name a release, stage and fleet) on
a fleet of the current revision, whose deployment the desired state no longer has: a release
or stage removed, a fleet dropped from a stage, or `main` rewound to before they existed.

They are shown, never stopped silently: a rewind by mistake must not stop production. Only
the fleet's pruning policy (`prune: true` in its fleet file) or `denv prune` stops them. Where
git's history says so, each carries the commit that removed its deployment.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from reconciler.fleet.model.labels import DeploymentKey, record_key
from reconciler.fleet.model.observed import UnitRecord
from reconciler.spec.base import Spec
from reconciler.spec.fleet import Fleet


class Removal(Spec):
    """Where the default branch's first-parent history dropped a deployment: `removed_in`, the
    newest commit without it whose parent had it (`last_with`); both None when no commit of
    the `searched` newest had it (a rewind to before it existed, or older than the bound)."""

    removed_in: str | None = None
    last_with: str | None = None
    searched: int = 0

    def text(self) -> str:
        if self.last_with is None:
            return f"no commit of the last {self.searched} on the branch has it (a rewind?)"
        if self.removed_in is None:
            return f"the head {self.last_with[:12]} names it"
        return f"removed in {self.removed_in[:12]} (last in {self.last_with[:12]})"


@dataclass(frozen=True)
class RetiredFleet:
    """A fleet whose file the branch removed while a release named it: known by its last
    version (`fleet`; None when that version does not load), so that what denv started there
    is still observed and shown. Its units are orphans the bot never stops; `denv prune` does."""

    name: str
    removal: Removal
    fleet: Fleet | None

    def problem(self) -> str | None:
        """Why what runs there is not known, or None."""
        if self.fleet is not None:
            return None
        return (
            f"fleets/{self.name}.yaml: {self.removal.text()}; that last version does not load: "
            "what denv started on its hosts is not known"
        )


class Orphan(Spec):
    release: str
    stage: str
    fleet: str
    host: str
    unit: str
    role: str
    revision: str | None  # the revision it was started from
    gpus: tuple[int, ...] = ()
    port: int | None = None
    alive: bool
    reason: str  # why the desired state does not have it
    prune: bool  # its fleet's policy stops it (this plan stops it)
    removal: Removal | None = None  # found in history (an adapter fills it in)

    @property
    def key(self) -> DeploymentKey:
        return self.release, self.stage, self.fleet

    def text(self) -> str:
        """One line: the unit, where it runs, why it is an orphan, and what happens to it."""
        state = "running" if self.alive else "exited"
        where = f"{self.unit} on {self.host} ({state}"
        where += f", GPUs {','.join(map(str, self.gpus))}" if self.gpus else ""
        where += f", port {self.port})" if self.port is not None else ")"
        found = f"; {self.removal.text()}" if self.removal is not None else ""
        fate = "stopped: its fleet prunes" if self.prune else "left running: `denv prune` stops it"
        return f"orphaned {where}: {self.reason}{found}; {fate}"


def orphan(record: UnitRecord, host: str, reason: str, prune: bool) -> Orphan:
    """A labelled record no wanted deployment has, as an orphan."""
    key = record_key(record)
    assert key is not None  # only the reconciler's records are orphans
    labels = record.labels
    return Orphan(
        release=key[0],
        stage=key[1],
        fleet=key[2],
        host=host,
        unit=record.id,
        role=labels.get("role", ""),
        revision=labels.get("revision") or None,
        gpus=record.gpus,
        port=record.port,
        alive=record.alive,
        reason=reason,
        prune=prune,
    )


def removal(history: Iterable[tuple[str, set[DeploymentKey]]], key: DeploymentKey) -> Removal:
    """The commit that removed deployment `key`, from `history`: (commit, the deployments its
    releases name), newest first, as far back as the caller bounds it."""
    newer: str | None = None
    searched = 0
    for commit, keys in history:
        searched += 1
        if key in keys:
            return Removal(removed_in=newer, last_with=commit, searched=searched)
        newer = commit
    return Removal(searched=searched)
