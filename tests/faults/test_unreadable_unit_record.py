"""One unit record truncated while its engine runs: never read as "no unit". The agent lists
the record's path apart; the bot leaves the host alone (no launch there, nothing stopped),
naming the host and the file in its pass's errors and in `denv status`; a launch of that
unit refuses; `denv fleet repair` stops the unit's processes (found by their DENV_UNIT
marker) and moves the record aside, and the next pass starts the unit again where it was."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from reconciler.fleet.hostagent import AgentFailed
from reconciler.fleet.model.answers import UnitsAnswer
from tests.fleet.conftest import wait_for
from tests.fleet.test_recovery import runs
from tests.labs.elastic_local import FLEET, ElasticLab, elastic_lab
from tests.labs.release import release_yaml, stage
from tests.reconcile.conftest import GitRepo, git_repo

__all__ = ["git_repo"]  # the fixture


@pytest.fixture
def lab(git_repo: GitRepo, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ElasticLab]:
    # the agent's home outside the repository: a commit never meets its files changing
    folder = tmp_path_factory.mktemp("lab")
    for found in elastic_lab(git_repo, folder, gpus=2):
        yield found
        found.denv("fleet", "repair", FLEET, "--grace", "1s")  # a failed test's engine too


def test_an_unreadable_unit_record_is_not_taken_for_no_unit(lab: ElasticLab) -> None:
    lab.repo.write("releases/chat-8b/denv.yaml", release_yaml(stage("canary", FLEET)))
    lab.repo.commit("chat-8b: 1 replica")
    lab.reconcile()
    [engine] = lab.engines()
    others = {u.id: u.pid for u in lab.units() if u.id != engine.id}  # the router
    assert engine.pid is not None and runs(engine.pid)
    endpoint = lab.endpoint()
    path = lab.cache / "home" / "units" / f"{engine.id}.json"
    truncated = path.read_bytes()[:100]
    path.write_bytes(truncated)

    done = lab.reconcile(ok=False)

    said = done.stdout + done.stderr
    assert done.returncode == 1, said
    assert f"fleet {FLEET}: localhost: unit record {path} is unreadable" in said
    assert f"repair: `denv fleet repair {FLEET}`" in said
    listed = lab.agent().call("units", answer=UnitsAnswer)
    assert [(u.id, u.path) for u in listed.unreadable] == [(engine.id, str(path))]
    assert {u.id: u.pid for u in listed.units} == others  # no second engine, nothing stopped
    assert runs(engine.pid)
    assert path.read_bytes() == truncated
    seen = lab.status()["unreachable"][FLEET]["hosts"]["localhost"]
    assert seen["cause"] == f"unreadable record {path}"
    with pytest.raises(AgentFailed, match=f"unit record {path} is unreadable"):
        lab.agent().launch({"id": engine.id, "digest": "d", "argv": ["sleep", "60"]})

    repaired = lab.json("fleet", "repair", FLEET, "--grace", "5s")

    [moved] = repaired["repaired"]["localhost"]
    assert (moved["record"], moved["id"], moved["path"]) == ("unit", engine.id, str(path))
    assert engine.pid in moved["stopped"]
    assert Path(moved["moved_to"]).read_bytes() == truncated
    wait_for(lambda: not runs(engine.pid), what="the engine to end")
    lab.reconcile()
    [again] = lab.engines()
    assert (again.id, again.port, again.gpus) == (engine.id, engine.port, engine.gpus)
    assert {u.id: u.pid for u in lab.units() if u.id != engine.id} == others
    assert lab.endpoint() == endpoint
