"""Pure logic: which release revision each stage runs.

The first stage of a release follows the branch head: it runs the release's revision at the
head, the last commit that changed the release's inputs (reconcile/history.py), so a commit
that touches nothing the release uses (a pin, a traffic file) changes nothing it runs. Each
later stage runs the revision pinned for it in `releases/<name>/promotions.yaml` (read at the
head). A later stage without a pin is not deployed yet. The stages themselves are the head's:
a stage removed at the head runs nowhere, whatever its pin says.
"""

from __future__ import annotations

from collections.abc import Mapping

from reconciler.spec.base import Spec
from reconciler.spec.repo import Repo


class StageRevision(Spec):
    release: str
    stage: str
    revision: str  # the commit whose release file and recipes this stage runs
    pinned: bool  # False: the first stage, following the head
    # Where its files are read when not at `revision`: the head, for the first stage (the
    # release's inputs there are its revision's, and an unrelated file broken at that older
    # commit must not stop it). A rollback that changes `revision` clears it.
    files_at: str | None = None

    @property
    def commit(self) -> str:
        """The commit the stage's deployment is resolved from."""
        return self.files_at or self.revision


class Pending(Spec):
    """A stage that runs nothing yet."""

    release: str
    stage: str
    reason: str


class Stages(Spec):
    head: str  # the commit the plan is made at: fleets and pins are read here
    running: tuple[StageRevision, ...] = ()
    pending: tuple[Pending, ...] = ()


def stage_revisions(head: Repo, head_commit: str, revisions: Mapping[str, str]) -> Stages:
    """Every stage of every release of `head`, with the revision it runs, or why it runs
    nothing yet. `revisions`: each release's revision at the head (GitSource.stages)."""
    running: list[StageRevision] = []
    pending: list[Pending] = []
    for name, release in sorted(head.releases.items()):
        pins = head.promotions.get(name)
        for index, stage in enumerate(release.stages):
            if index == 0:
                revision = revisions.get(name, head_commit)
                running.append(
                    StageRevision(
                        release=name,
                        stage=stage.name,
                        revision=revision,
                        pinned=False,
                        files_at=head_commit if revision != head_commit else None,
                    )
                )
                continue
            pin = pins.promotions.get(stage.name) if pins is not None else None
            if pin is None:
                pending.append(
                    Pending(
                        release=name,
                        stage=stage.name,
                        reason=f"not deployed yet: no pin in releases/{name}/promotions.yaml",
                    )
                )
            else:
                running.append(
                    StageRevision(
                        release=name, stage=stage.name, revision=pin.revision, pinned=True
                    )
                )
    return Stages(head=head_commit, running=tuple(running), pending=tuple(pending))
