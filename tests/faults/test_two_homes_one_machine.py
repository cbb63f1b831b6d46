"""Two bots on one machine with different `DENV_HOME`s, one local fleet: the fleet's lease is
kept for the machine, not for a home, and it is not given to a second home while the first
home's units run. The second bot starts nothing (no second engine on the same GPUs, no second
router) and says which home drives the GPUs; once those units are stopped, it takes over."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.faults.orphans import alive, empty_lab, put_release
from tests.labs.elastic_local import ElasticLab
from tests.reconcile.conftest import GitRepo, git_repo

__all__ = ["git_repo"]  # the fixture


@pytest.fixture
def lab(git_repo: GitRepo, tmp_path: Path) -> Iterator[ElasticLab]:
    yield from empty_lab(git_repo, tmp_path)  # its units are stopped when the loop ends


def test_a_second_home_on_one_machine_never_drives_the_same_gpus(
    lab: ElasticLab, tmp_path: Path
) -> None:
    other = ElasticLab(lab.repo, tmp_path / "other")  # the same repository, another home
    assert other.env["DENV_HOME"] != lab.env["DENV_HOME"]
    put_release(lab, "chat")
    lab.repo.commit("chat on the lab")
    lab.reconcile()
    first = alive(lab, "chat")
    assert len(first) == 2  # the engine and its router
    try:
        refused = other.reconcile(ok=False)
        said = refused.stdout + refused.stderr
        assert refused.returncode == 1, said
        home = lab.env["DENV_HOME"]
        assert f"this machine's local fleets are driven from the agent home {home}" in said
        assert "one controller per GPU" in said
        assert other.units() == []  # nothing started from the second home
        assert alive(lab, "chat") == first  # and nothing of the first touched
        lab.stop_all()  # the first home's units stopped: its GPUs are free
        other.reconcile()
        assert len(alive(other, "chat")) == 2
    finally:
        other.stop_all()
