"""The venv runtime for real on an sshd test host: a small package from the registry at a
pinned version stands in for an engine; an interrupted build is never used and is rebuilt;
prune keeps what units use. Needs the package registry (PyPI), as `make test` does."""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from reconciler.engines.runtime import HostRuntime, Need, in_runtime
from reconciler.engines.units import Unit
from reconciler.fleet.hostagent import AgentClient
from reconciler.fleet.launching import launch_payload
from reconciler.fleet.prepare import JobState, follow, prepare_hosts, prepare_payload
from reconciler.fleet.ssh import SshTransport
from reconciler.spec.fleet import Host
from tests.fleet.conftest import answers, free_port, wait_for
from tests.labs.sshd import SshLab, SshServer, ssh_settings

SIX = Need(kind="venv", name="six-1.16.0", packages=("six==1.16.0",))


@pytest.fixture
def n0(ssh_lab: SshLab) -> SshServer:
    return ssh_lab.start("n0")  # loopback: pip reaches the registry from here


@pytest.fixture
def host(ssh_lab: SshLab, n0: SshServer) -> Iterator[tuple[AgentClient, Path]]:
    server = n0
    transport = SshTransport(
        Host(name="n0", address=server.address, port=server.port, gpus=0), ssh_settings(ssh_lab)
    )
    agent = AgentClient(transport, python=sys.executable)
    yield agent, server.folder / "denv-home"
    for unit in agent.units():
        agent.stop(unit.id, grace=2)
    transport.close()


def web_unit(port: int) -> Unit:
    """A unit whose 'engine' is the package six at 1.16.0; it serves HTTP so it can be seen."""
    argv = ["python3", "-m", "http.server", str(port), "--bind", "127.0.0.1"]
    return Unit(
        name="web",
        role="aggregated",
        replica=0,
        node=0,
        engine="six",
        host="n0",
        address="127.0.0.1",
        argv=argv,
        env={},
        port=port,
        gpus=0,
        gpu_indices=[],
    )


def run_on(agent: AgentClient, *argv: str) -> str:
    done = agent.transport.run(list(argv), timeout=60)
    assert done.exit_code == 0, done.stderr
    return done.stdout.strip()


def test_venv_is_built_once_and_runs_a_unit(
    host: tuple[AgentClient, Path], n0: SshServer, ssh_lab: SshLab, tmp_path: Path
) -> None:
    from tests.fleet.test_cli import _lab_repo, denv

    repo = _lab_repo(tmp_path, ssh_lab, [n0.address])
    fleet = repo / "fleets" / "lab.yaml"
    fleet.write_text(fleet.read_text().replace("connect_timeout: 2", f"port: {n0.port}"))
    empty = denv("fleet", "runtimes", "lab", home=tmp_path / "home", cwd=repo)
    assert empty.returncode == 0, empty.stderr
    assert "nothing prepared yet" in empty.stdout
    agent, home = host
    runtime = HostRuntime(kind="venv", home=agent.probe().home or "")
    runnable = in_runtime(web_unit(free_port()), "rel.canary.web", "1.16.0", runtime)
    assert runnable.need == SIX
    seen: list[JobState] = []
    first = follow(
        "n0", agent.prepare, prepare_payload([SIX], None, "n0"), seen.append, timeout=300
    )
    assert first.state == "done" and [r["name"] for r in first.ready] == ["six-1.16.0"]
    python = f"{home}/engines/six-1.16.0/bin/python"
    assert run_on(agent, python, "-c", "import six; print(six.__version__)") == "1.16.0"
    again = follow("n0", agent.prepare, prepare_payload([SIX], None, "n0"), seen.append, timeout=30)
    assert again.id == first.id and again.state == "done"  # the finished job answers
    unit = runnable.unit
    assert unit.argv[0] == python
    agent.launch(launch_payload(unit, "rel.canary.web"))
    wait_for(lambda: answers(unit.port or 0), what="the unit from the venv")
    [ready] = agent.runtimes()["runtimes"]
    assert (ready["name"], ready["in_use"]) == ("six-1.16.0", True) and ready["bytes"] > 10**6
    # `denv fleet runtimes` lists it, as JSON and as a table
    listed = denv("fleet", "runtimes", "lab", "--json", home=tmp_path / "home", cwd=repo)
    [row] = json.loads(listed.stdout)["hosts"]["n0"]["runtimes"]
    assert (row["kind"], row["name"], row["in_use"]) == ("venv", "six-1.16.0", True)
    table = denv("fleet", "runtimes", "lab", home=tmp_path / "home", cwd=repo).stdout
    assert "six-1.16.0" in table and "GB" in table


def test_an_interrupted_build_is_never_used_and_is_rebuilt(
    host: tuple[AgentClient, Path],
) -> None:
    agent, home = host
    paused = prepare_payload([SIX], None, "n0", pause_at="pip")
    wait_for(
        lambda: (
            s
            if (s := JobState.model_validate(agent.prepare(paused, 1))).step.startswith("paused")
            else None
        ),
        timeout=60,
        what="the build to reach pip",
    )
    job = agent.prepare(paused, 0)
    os.kill(job["pid"], signal.SIGKILL)  # halfway: the venv exists, pip never ran
    builds = [p.name for p in (home / "engines").iterdir() if p.name.startswith(".build-")]
    assert builds and not (home / "engines" / "six-1.16.0").exists()
    assert agent.runtimes()["runtimes"] == []  # nothing half-built is offered
    done, errors = prepare_hosts(
        {"n0": ("n0", agent.prepare)}, {"n0": prepare_payload([SIX], None, "n0")}, 1, timeout=300
    )
    assert errors == {} and done["n0"].state == "done"
    assert not [p for p in (home / "engines").iterdir() if p.name.startswith(".build-")]
    python = f"{home}/engines/six-1.16.0/bin/python"
    assert run_on(agent, python, "-c", "import six; print(six.__version__)") == "1.16.0"


def test_prune_keeps_what_units_use(host: tuple[AgentClient, Path]) -> None:
    agent, home = host
    newer = Need(kind="venv", name="six-1.17.0", packages=("six==1.17.0",))
    payload = prepare_payload([SIX, newer], None, "n0")
    _, errors = prepare_hosts({"n0": ("n0", agent.prepare)}, {"n0": payload}, 1, timeout=300)
    assert errors == {}, errors
    runtime = HostRuntime(kind="venv", home=str(home))
    unit = in_runtime(web_unit(free_port()), "rel.canary.web", "1.17.0", runtime).unit
    agent.launch(launch_payload(unit, "rel.canary.web"))
    wait_for(lambda: answers(unit.port or 0), what="the unit from six-1.17.0")
    assert agent.prune(keep_hours=1)["removed"] == []  # the newer one has not run an hour
    assert agent.prune(keep_hours=0)["removed"] == ["six-1.16.0"]
    assert [r["name"] for r in agent.runtimes()["runtimes"]] == ["six-1.17.0"]
    assert agent.prune(keep_hours=0)["removed"] == []  # in use: kept
