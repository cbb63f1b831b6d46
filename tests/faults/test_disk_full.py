"""A host whose disk fills during a roll: the launch that cannot write its record fails with
the host's own words, and the host is left alone for the rest of the pass, as an unreachable
one is. Its replica keeps running on its old spec (never stopped for a replacement that
cannot start), no engine is left half started, and once there is room again the next pass
rolls it."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.labs.disks import fill, mount_small_disk, unmount
from tests.labs.elastic_local import FLEET, ElasticLab, elastic_lab
from tests.labs.release import release_yaml, stage
from tests.reconcile.conftest import GitRepo, git_repo

__all__ = ["git_repo"]  # the fixture


@pytest.fixture
def lab(git_repo: GitRepo, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ElasticLab]:
    """The lab whose agent keeps its unit records on a disk of 1 MiB of its own (tmpfs)."""
    if os.geteuid() != 0:
        pytest.skip("a disk of its own is a tmpfs mount, which needs root (CI runs as root)")
    folder = tmp_path_factory.mktemp("lab")
    for found in elastic_lab(git_repo, folder, gpus=2):
        units = found.cache / "home" / "units"
        mount_small_disk(units)
        try:
            yield found
        finally:
            with contextlib.suppress(Exception):
                found.stop_all()  # while their records are there to say what runs
            unmount(units)


def engine_processes(lab: ElasticLab, unit_id: str) -> list[int]:
    """Processes started for the lab's unit, found by the markers every unit's environment
    has: its id, and its agent's home (another test's lab may run a unit of the same id)."""
    marks = {f"DENV_UNIT={unit_id}".encode(), f"DENV_HOME={lab.cache / 'home'}".encode()}
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if marks <= set((entry / "environ").read_bytes().split(b"\0")):
                    found.append(int(entry.name))
    return found


def test_a_full_disk_fails_one_launch_and_stops_nothing(lab: ElasticLab) -> None:
    lab.repo.write("releases/chat-8b/denv.yaml", release_yaml(stage("canary", FLEET)))
    lab.repo.commit("chat-8b: 1 replica")
    lab.reconcile()
    [engine] = lab.engines()
    before = {(u.id, u.pid, u.digest) for u in lab.units()}
    filler = fill(lab.cache / "home" / "units")
    lab.repo.write("releases/chat-8b/denv.yaml", release_yaml(stage("canary", FLEET), batch=64))
    lab.repo.commit("chat-8b: max_batch 64")

    done = lab.reconcile(ok=False)

    said = done.stdout + done.stderr
    assert done.returncode == 1, said
    launch = lab.cache / "home" / "units" / f"{engine.id}~surge.json.launch"
    assert f"localhost: {launch}: No space left on device" in said, said
    assert "nothing more is asked of localhost in this pass" in said, said
    assert {(u.id, u.pid, u.digest) for u in lab.units()} == before  # nothing stopped
    assert engine_processes(lab, f"{engine.id}~surge") == []  # nor half started
    assert engine.pid in engine_processes(lab, engine.id)  # as the running one is found
    assert lab.endpoint()

    filler.unlink()
    lab.reconcile()
    [rolled] = lab.engines()
    assert rolled.id == engine.id and rolled.digest != engine.digest
    assert engine_processes(lab, f"{engine.id}~surge") == []
