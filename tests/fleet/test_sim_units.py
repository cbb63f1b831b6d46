"""Simulator units of a release, launched through the agent over SSH on hosts in network
namespaces: they answer on their port, outlive the SSH session, and stop removes them."""

from __future__ import annotations

import sys
import urllib.request

from reconciler.catalog.deployments import deployments
from reconciler.engines.units import EngineContext
from reconciler.fleet.drivers.registry import rules_of
from reconciler.fleet.hostagent import AgentClient
from reconciler.fleet.launching import launch_payload
from reconciler.fleet.render import render
from reconciler.fleet.ssh import SshTransport
from reconciler.spec.fleet import Fleet, Host
from reconciler.spec.loader import open_repo
from tests.conftest import ROOT
from tests.fleet.conftest import answers_at, wait_for
from tests.labs.sshd import SshLab, ssh_settings


def health(address: str, port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://{address}:{port}/health", timeout=1) as answer:
            return int(answer.status)
    except OSError:
        return 0


def test_simulator_units_over_ssh(ssh_lab: SshLab) -> None:
    server = ssh_lab.start("sim0", namespaced=True)
    repo = open_repo(ROOT)
    lab = Fleet(
        name="lab",
        provider="test",
        hardware="h200",
        simulated=True,
        transport="ssh",
        ssh=ssh_settings(ssh_lab),
        hosts=[Host(name="sim0", address=server.address, gpus=8)],
    )
    chat = next(d for d in deployments(repo) if d.release == "chat-8b" and d.stage == "canary")
    chat = chat.model_copy(update={"fleet": "lab"})
    hardware = repo.resolve_hardware("h200")
    assert hardware is not None
    context = EngineContext(
        hardware=hardware,
        model=repo.models[chat.recipe.model],
        python=sys.executable,
        base_port=21000,
    )
    units = [u for u in render(chat, lab, 8, context, rules_of(lab)) if u.role != "router"]
    assert [u.engine for u in units] == ["sim", "sim"]

    def agent() -> AgentClient:
        return AgentClient(SshTransport(lab.hosts[0], ssh_settings(ssh_lab)), sys.executable)

    first = agent()
    try:
        for unit in units:
            first.launch(launch_payload(unit, f"chat-8b.canary.{unit.name}"))
        first.transport.close()  # the session that launched them is gone
        for unit in units:
            assert unit.port is not None
            wait_for(
                lambda u=unit: health(u.address, u.port) == 200,
                timeout=30,
                what=f"{unit.name} to answer /health on {unit.address}:{unit.port}",
            )
        assert all(u.alive for u in agent().units())
    finally:
        second = agent()
        for unit in units:
            second.stop(f"chat-8b.canary.{unit.name}", grace=5)
    assert second.units() == []
    for unit in units:
        assert unit.port is not None and not answers_at(unit.address, unit.port)
