"""A fleet's lease file garbled (NUL bytes) while another bot holds the lease: never read as
"no lease". The bot's pass leaves that fleet alone with the file's host and path in its
errors, `denv status` says the same, the file stays as it is, and `denv fleet repair` moves
it aside, after which the next pass takes the lease and acts."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.labs.elastic_local import FLEET, ElasticLab, elastic_lab
from tests.labs.release import release_yaml, stage
from tests.reconcile.conftest import GitRepo, git_repo

__all__ = ["git_repo"]  # the fixture


@pytest.fixture
def lab(git_repo: GitRepo, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ElasticLab]:
    # the agent's home outside the repository: a commit never meets its files changing
    folder = tmp_path_factory.mktemp("lab")
    yield from elastic_lab(git_repo, folder, gpus=2)


def deploy(lab: ElasticLab, replicas: int) -> None:
    lab.repo.write(
        "releases/chat-8b/denv.yaml", release_yaml(stage("canary", FLEET), replicas=replicas)
    )
    lab.repo.commit(f"chat-8b: {replicas} replica(s)")


def test_an_unreadable_lease_is_never_taken_and_is_repaired(lab: ElasticLab) -> None:
    deploy(lab, 1)
    lab.reconcile()
    assert len(lab.engines()) == 1
    # another bot holds the lease, its rollout state in its note; then the file is garbled
    held = lab.agent().lease("reconciler", "elsewhere/1", 600, note={"at": 1.0, "checks": {}})
    assert held.held
    # a local fleet's lease: kept for the machine (the test's), whatever the agent's home
    path = Path(os.environ["DENV_MACHINE_DIR"]) / "leases" / "reconciler.json"
    garbled = path.read_bytes()[:40] + b"\0" * 64
    path.write_bytes(garbled)
    deploy(lab, 2)  # what a pass that took the lease would act on

    done = lab.reconcile(ok=False)

    said = done.stdout + done.stderr
    assert done.returncode == 1, said
    assert (
        f"fleet {FLEET}: no lease, nothing done: localhost: lease file {path} is unreadable" in said
    )
    assert f"repair: `denv fleet repair {FLEET}`" in said
    assert path.read_bytes() == garbled  # left as it is
    assert len(lab.engines()) == 1  # nothing done on the fleet
    shown = lab.status()["bot"][FLEET]
    assert f"lease file {path} is unreadable" in shown["error"]

    repaired = lab.json("fleet", "repair", FLEET)

    [moved] = repaired["repaired"]["localhost"]
    assert moved["record"] == "lease" and moved["path"] == str(path)
    assert Path(moved["moved_to"]).read_bytes() == garbled
    assert moved["moved_to"].startswith(f"{path}.unreadable-")
    assert not path.exists()
    lab.reconcile()
    assert len(lab.engines()) == 2
    assert json.loads(path.read_text())["holder"] is None  # released by the pass that acted
