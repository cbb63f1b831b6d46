"""A release removed in the same commit as its fleet's file: the fleet's last version (from
history) says where its units run, so they are still observed and shown as orphans with the
commit that removed them; the bot leaves them running, `denv prune` stops them; the release on
the fleet that stays is never touched."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.faults.orphans import alive, empty_lab, orphaned, plan_json, put_release
from tests.labs.elastic_local import FLEET, ElasticLab, fleet_text
from tests.labs.release import release_yaml, stage
from tests.reconcile.conftest import GitRepo, git_repo

__all__ = ["git_repo"]  # the fixture

SPARE = "spare"


@pytest.fixture
def lab(git_repo: GitRepo, tmp_path: Path) -> Iterator[ElasticLab]:
    yield from empty_lab(git_repo, tmp_path)


def test_a_fleet_file_removed_with_its_release_leaves_its_units_shown(lab: ElasticLab) -> None:
    put_release(lab, "chat")
    lab.repo.write(f"fleets/{SPARE}.yaml", fleet_text(2).replace(f"name: {FLEET}", "name: spare"))
    lab.repo.write("releases/extra/denv.yaml", release_yaml(stage("canary", SPARE)))
    last_with = lab.repo.commit("chat on the lab, extra on a spare fleet")
    lab.reconcile()
    kept = {u.id for u in alive(lab, "chat")}
    running = {u.id for u in alive(lab, "extra")}
    assert len(running) == 2 and len(kept) == 2

    lab.repo.remove("releases/extra")
    lab.repo.remove(f"fleets/{SPARE}.yaml")
    removed_in = lab.repo.commit("retire extra and its fleet")
    done = lab.reconcile()
    assert "orphaned" in done.stdout, done.stdout
    assert {u.id for u in alive(lab, "extra")} == running  # shown, and left running

    shown = orphaned(plan_json(lab), "extra")
    assert {(o["unit"], o["fleet"]) for o in shown} == {(u, SPARE) for u in running}
    assert {(o["removal"]["removed_in"], o["removal"]["last_with"]) for o in shown} == {
        (removed_in, last_with)
    }
    assert {o["unit"] for o in orphaned(lab.status(), "extra")} == running

    pruned = lab.denv("prune", "--fleet", SPARE)
    assert pruned.returncode == 0, pruned.stdout + pruned.stderr
    assert alive(lab, "extra") == []
    assert {u.id for u in alive(lab, "chat")} == kept
    assert orphaned(plan_json(lab), "extra") == []
