"""vLLM's CPU build deployed by denv, end to end, on this machine's cores: the runtime built by
the agent, two replicas behind the real sglang-router, readiness as denv judges it, /metrics
under the names denv's alarms read (and diffed with the simulator's), the official openai
client through the router, `denv parity run` between the replicas, a rolling replace under
light load with no failed request, and `denv bench run` at two concurrency levels.

The tests of this module run in order on one deployment (each engine start costs a minute or
more); a failure shows the engines' own last log lines."""

from __future__ import annotations

import re
import urllib.request
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from tests.real_engine.lab import CORES, RUNTIME, CpuLab, make_lab

pytestmark = pytest.mark.real_engine

SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? ")


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CpuLab]:
    found = make_lab(tmp_path_factory.mktemp("real-engine"))
    yield found
    found.stop_all()  # never leave an engine behind, also when a test failed


def endpoint(lab: CpuLab) -> str:
    [row] = [d for d in lab.status()["deployments"] if d["fleet"] == "cpu"]
    return f"{row['endpoint']}/v1"


def engines(lab: CpuLab) -> list[Any]:
    return [u for u in lab.units() if u.alive and u.labels.get("role") != "router"]


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        text: str = answer.read().decode()
        return text


def client(lab: CpuLab) -> openai.OpenAI:
    return openai.OpenAI(base_url=endpoint(lab), api_key="unused", max_retries=0, timeout=60)


def test_deploys_two_replicas_of_the_cpu_build_behind_the_router(lab: CpuLab) -> None:
    lab.release(batch=8)
    done = lab.reconcile()
    assert done.returncode == 0, done.stdout + done.stderr + lab.engine_logs()
    assert "done: start 3" in done.stdout, done.stdout + done.stderr
    [row] = [d for d in lab.status()["deployments"] if d["fleet"] == "cpu"]
    assert (row["ready"], row["replicas"], row["drift"]) == (2, 2, ""), row
    running = engines(lab)
    assert sorted(g for u in running for g in u.gpus) == list(range(CORES))
    for unit in running:  # the agent's venv of the CPU build, on the server module
        assert unit.argv[0].endswith(f"/engines/{RUNTIME}/bin/python"), unit.argv
        assert unit.argv[1:3] == ("-m", "vllm.entrypoints.openai.api_server"), unit.argv
        assert "--kv-cache-memory-bytes" in unit.argv and "--enforce-eager" in unit.argv
    shown = lab.denv("fleet", "runtimes", "cpu", "--json")
    assert shown.returncode == 0, shown.stderr
    assert RUNTIME in shown.stdout
