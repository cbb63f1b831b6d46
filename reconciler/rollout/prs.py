"""Pure logic: the bot's pull requests as `BotChange`s — a promotion moves the next stage's
pin; a rollback moves a pin back (or, for the first stage, restores the release block and
its recipes) and lists the bad revision under `rejected`. Edits go through the round-trip
writer, so the comments of `promotions.yaml` and `denv.yaml` survive."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from reconciler.forge.protocol import BotChange, BotFiles
from reconciler.spec.paths import promotions_file, release_file
from reconciler.spec.yamlio import parse_yaml

NEW_PROMOTIONS = (
    "# Written by the denv bot through pull requests: which release revision each later\n"
    "# stage runs, and the revisions that were rolled back (never promoted again).\n"
    "promotions: {}\nrejected: []\n"
)


def promote_branch(release: str, stage: str) -> str:
    return f"denv/promote/{release}/{stage}"


def rollback_branch(release: str, stage: str) -> str:
    return f"denv/rollback/{release}/{stage}"


def _stamp(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _promotions(files: BotFiles, release: str) -> Any:
    path = promotions_file(release)
    if not files.exists(path):
        files.write(path, NEW_PROMOTIONS)
    doc = files.yaml(path)
    if doc.get(["promotions"]) is None:
        doc.set(["promotions"], {})
    return doc


def set_pin(files: BotFiles, release: str, stage: str, revision: str, at: datetime) -> None:
    doc = _promotions(files, release)
    doc.set(["promotions", stage], {"revision": revision, "at": _stamp(at), "by": "denv-bot"})


def add_rejection(
    files: BotFiles, release: str, revision: str, reason: str, at: datetime, stage: str
) -> None:
    """List `revision` as rejected on `stage` (once; an entry without a stage covers all)."""
    doc = _promotions(files, release)
    listed = list(doc.get(["rejected"]) or [])
    if any(
        isinstance(r, dict) and r.get("revision") == revision and r.get("stage") in (None, stage)
        for r in listed
    ):
        return
    entry = {"revision": revision, "stage": stage, "reason": reason, "at": _stamp(at)}
    doc.set(["rejected"], [*listed, entry])


def promotion_change(
    release: str, stage: str, revision: str, title: str, body: str, at: datetime
) -> BotChange:
    def edit(files: BotFiles) -> None:
        set_pin(files, release, stage, revision, at)

    return BotChange(
        branch=promote_branch(release, stage),
        title=title,
        body=body,
        message=f"{release}: promote {revision[:12]} to {stage}",
        edit=edit,
    )


def rollback_change(
    release: str,
    stage: str,
    first: bool,
    bad: str,
    target: str,
    reason: str,
    restore: Mapping[str, bytes],
    title: str,
    body: str,
    at: datetime,
) -> BotChange:
    """`restore`: for the first stage, the release file and recipe files at `target` (only
    its release block is put back in the release file; the stages stay as they are)."""

    def edit(files: BotFiles) -> None:
        if first:
            _restore(files, release, restore)
        else:
            set_pin(files, release, stage, target, at)
        add_rejection(files, release, bad, reason, at, stage)

    return BotChange(
        branch=rollback_branch(release, stage),
        title=title,
        body=body,
        message=f"{release}: roll {stage} back to {target[:12]}, reject {bad[:12]}",
        edit=edit,
    )


def _restore(files: BotFiles, release: str, restore: Mapping[str, bytes]) -> None:
    path = release_file(release)
    for name, data in sorted(restore.items()):
        if name != path:
            files.write(name, data.decode())
            continue
        good, _ = parse_yaml(path, data)
        if good is not None and isinstance(good.data, dict) and "release" in good.data:
            files.yaml(path).set(["release"], good.data["release"])
