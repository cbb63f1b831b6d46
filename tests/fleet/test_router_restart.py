"""The router is supervised on its host: the real sglang-router, launched by the host agent
in front of a `denv sim serve` engine, killed, is back and serving without a reconcile pass
(no launch, no other call than reading the agent's records)."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from reconciler.fleet.hostagent import AgentClient
from reconciler.fleet.launching import launch_payload
from reconciler.fleet.transport import LocalTransport
from tests.engines.sim.sims import (
    denv_router,
    free_port,
    require_sglang_router,
    sim_process,
    sim_spec,
    wait_until,
)
from tests.labs.sims import completion, router_ready

require_sglang_router()


@pytest.fixture
def agent(tmp_path: Path) -> Iterator[AgentClient]:
    env = {**os.environ, "DENV_HOME": str(tmp_path / "denv-home")}
    client = AgentClient(LocalTransport(env=env))
    yield client
    for unit in client.units():  # never leave a process behind, also when a test failed
        client.stop(unit.id, grace=5)


def serving(url: str) -> bool:
    return router_ready(url) and completion(url) == 200


def test_a_killed_router_is_started_again_by_its_supervisor(
    agent: AgentClient, tmp_path: Path
) -> None:
    spec = sim_spec(time_scale=10.0)
    with sim_process(spec, tmp_path) as sim:
        port = free_port()
        router = denv_router([sim], spec, f"http://127.0.0.1:{port}", free_port())
        assert router.restart
        payload = launch_payload(router, "chat-router")
        # The router looks up a tokenizer on the Hugging Face hub: a closed loopback port.
        payload["env"] = {"HF_ENDPOINT": "http://127.0.0.1:9", "HF_HOME": str(tmp_path / "hf")}
        first = agent.launch(payload)
        url = f"http://127.0.0.1:{port}"
        wait_until(lambda: serving(url), 120, "the router to serve")
        os.kill(first.pid or 0, signal.SIGKILL)
        wait_until(
            lambda: any(u.pid not in (None, first.pid) for u in agent.units()), 30, "a new router"
        )
        wait_until(lambda: serving(url), 120, "the restarted router to serve")
        (again,) = agent.units()
        assert again.alive and again.restarts == 1 and again.pid != first.pid
