"""`main` force-moved to a commit before a release existed: its engines and router keep
running (a rewind by mistake must not stop production) and are shown as orphans by the pass,
`denv plan` and `denv status`; `denv prune` stops them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pygit2
import pytest

from tests.faults.orphans import alive, empty_lab, orphaned, plan_json, put_release
from tests.labs.elastic_local import ElasticLab
from tests.reconcile.conftest import GitRepo, git_repo

__all__ = ["git_repo"]  # the fixture


@pytest.fixture
def lab(git_repo: GitRepo, tmp_path: Path) -> Iterator[ElasticLab]:
    yield from empty_lab(git_repo, tmp_path)


def test_a_rewound_release_is_shown_left_running_and_pruned_by_hand(lab: ElasticLab) -> None:
    before = lab.repo.commit("the lab fleet, no release")
    put_release(lab, "chat")
    lab.repo.commit("chat on the lab")
    lab.reconcile()
    running = {u.id for u in alive(lab, "chat")}
    assert len(running) == 2  # the engine and its router

    lab.repo.git.reset(pygit2.Oid(hex=before), pygit2.enums.ResetMode.HARD)  # main rewound
    done = lab.reconcile()
    assert "orphaned" in done.stdout, done.stdout
    assert {u.id for u in alive(lab, "chat")} == running  # nothing stopped

    shown = orphaned(plan_json(lab), "chat")
    assert {o["unit"] for o in shown} == running
    assert {o["reason"] for o in shown} == {"release chat was removed"}
    assert all(o["removal"]["removed_in"] is None for o in shown)  # not in main's history
    assert {o["unit"] for o in orphaned(lab.status(), "chat")} == running
    text = lab.denv("status")
    assert "orphaned chat.canary.lab." in text.stdout, text.stdout

    unknown = lab.denv("prune", "--fleet", "nope")
    assert unknown.returncode == 1 and "no fleet 'nope'" in unknown.stderr, unknown.stderr
    assert {u.id for u in alive(lab, "chat")} == running
    pruned = lab.denv("prune", "--json")
    assert pruned.returncode == 0, pruned.stdout + pruned.stderr
    assert json.loads(pruned.stdout)["stopped"] == 2
    assert "to stop: orphaned chat.canary.lab." in pruned.stderr
    assert alive(lab, "chat") == []
    assert orphaned(plan_json(lab), "chat") == []
