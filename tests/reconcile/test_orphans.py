"""The pure part of orphans: the commit that removed a deployment, from a history of the
deployments each commit names (newest first), and an orphan's line."""

from __future__ import annotations

import pytest

from reconciler.fleet.model.labels import DeploymentKey
from reconciler.fleet.model.observed import UnitRecord
from reconciler.reconcile.orphans import Removal, orphan, removal

KEY: DeploymentKey = ("chat", "canary", "lab")
OTHER: DeploymentKey = ("chat", "prod", "lab")


@pytest.mark.parametrize(
    ("history", "expected"),
    [
        ([("c3", {OTHER}), ("c2", {KEY, OTHER}), ("c1", {KEY})],
         Removal(removed_in="c3", last_with="c2", searched=2)),
        ([("c3", set()), ("c2", set()), ("c1", {KEY})],
         Removal(removed_in="c2", last_with="c1", searched=3)),
        ([("c2", {OTHER}), ("c1", set())], Removal(searched=2)),
        ([], Removal(searched=0)),
    ],
    ids=["removed-at-the-head", "removed-earlier", "never-in-history", "no-history"],
)  # fmt: skip
def test_the_removal_is_the_newest_commit_without_it(
    history: list[tuple[str, set[DeploymentKey]]], expected: Removal
) -> None:
    assert removal(history, KEY) == expected


def test_an_orphan_says_where_it_runs_why_and_what_happens_to_it() -> None:
    labels = {
        "release": "chat",
        "stage": "canary",
        "fleet": "lab",
        "revision": "abc",
        "role": "router",
    }
    record = UnitRecord(
        id="chat.canary.lab.router", digest="d", port=8000, alive=True, labels=labels
    )
    found = orphan(record, "h0", "release chat was removed", prune=False)
    found = found.model_copy(update={"removal": Removal(searched=200)})
    assert found.text() == (
        "orphaned chat.canary.lab.router on h0 (running, port 8000): release chat was removed;"
        " no commit of the last 200 on the branch has it (a rewind?);"
        " left running: `denv prune` stops it"
    )
    assert found.key == KEY and found.revision == "abc"
