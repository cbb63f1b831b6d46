"""A release removed while its fleet stays in git (another release runs there): its units are
orphans — shown with the commit that removed the release, left running by default, stopped by
the bot once the fleet's file says `prune: true`; the other release is never touched."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.faults.orphans import alive, empty_lab, orphaned, plan_json, put_release
from tests.labs.elastic_local import FLEET, ElasticLab
from tests.reconcile.conftest import GitRepo, git_repo

__all__ = ["git_repo"]  # the fixture


@pytest.fixture
def lab(git_repo: GitRepo, tmp_path: Path) -> Iterator[ElasticLab]:
    yield from empty_lab(git_repo, tmp_path)


def test_a_removed_release_waits_for_the_fleets_prune_policy(lab: ElasticLab) -> None:
    put_release(lab, "chat")
    put_release(lab, "extra")
    last_with = lab.repo.commit("chat and extra on the lab")
    lab.reconcile()
    kept = {u.id for u in alive(lab, "chat")}
    running = {u.id for u in alive(lab, "extra")}
    assert len(running) == 2

    lab.repo.remove("releases/extra")
    removed_in = lab.repo.commit("retire extra")
    done = lab.reconcile()
    assert "orphaned" in done.stdout, done.stdout
    assert {u.id for u in alive(lab, "extra")} == running  # shown and waiting

    shown = orphaned(plan_json(lab), "extra")
    assert {o["unit"] for o in shown} == running
    assert {(o["removal"]["removed_in"], o["removal"]["last_with"]) for o in shown} == {
        (removed_in, last_with)
    }
    assert {o["unit"] for o in orphaned(lab.status(), "extra")} == running

    lab.repo.replace(
        f"fleets/{FLEET}.yaml", "  simulated: true\n", "  simulated: true\n  prune: true\n"
    )
    lab.repo.commit("the lab prunes")
    lab.reconcile()
    assert alive(lab, "extra") == []
    assert {u.id for u in alive(lab, "chat")} == kept
    assert orphaned(plan_json(lab), "extra") == []
