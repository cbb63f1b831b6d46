"""Models: what an engine module produces — units (one process each) with their argv, env,
GPUs, ports, probes and metrics — the context that says what varies between hosts, and where
an engine keeps the metrics the rollout's alarms read."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from pydantic import Field, NonNegativeInt

from reconciler.spec.base import Spec
from reconciler.spec.catalog import Hardware, ModelArch

UnitRole = Literal["aggregated", "prefill", "decode", "router"]
RouterPolicy = Literal["round_robin", "cache_aware", "power_of_two", "random"]


class EngineContext(Spec):
    """Everything that varies from one host or run to the next, passed in: engine modules
    read no environment, files or clock."""

    hardware: Hardware  # the fleet's GPUs: vendor picks CUDA_ or HIP_VISIBLE_DEVICES
    model: ModelArch | None = None  # the architecture; the simulator needs it
    python: str = "python3"  # interpreter with denv installed (simulator units)
    engine_python: str = "python3"  # interpreter with SGLang and the routers installed
    vllm: str = "vllm"  # the `vllm` command on the hosts
    model_path: str | None = None  # where the weights sit on the hosts; None: the engine
    # fetches hf:// weights itself, pinned with --revision
    base_port: int = Field(default=8000, ge=1024, le=65535 - 4096)
    seed: int = 0  # engine sampling seed (vLLM --seed, SGLang --random-seed)
    router_policy: RouterPolicy = "cache_aware"
    sim_time_scale: float = Field(default=1.0, gt=0)


class Probe(Spec):
    """An HTTP GET on the unit's port that answers `status` when the check passes."""

    path: str
    status: int = 200


@dataclass(frozen=True)
class Series:
    """A sample name (a histogram's base name) and label values as regular expressions that
    must match whole, as PromQL's `=~` does; series without a listed label do not match."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(re.fullmatch(rx, labels.get(k, "")) for k, rx in self.labels.items())


@dataclass(frozen=True)
class EngineSeries:
    """Where an engine (or a router) keeps each alarm metric (reconciler/spec/alarm_metrics.py
    names them and says how each is read: a histogram's base name, a gauge, or for a ratio the
    counter over requests, e.g. error_rate's failed requests); a metric it lacks is absent."""

    requests: Series  # a counter of requests answered, failures included
    metrics: Mapping[str, Series]
    # Counters of prompt and generated tokens: the lengths an elastic stage's traffic has
    # (its autoscaler's predictive signal); None where the engine does not count them.
    prompt_tokens: Series | None = None
    generation_tokens: Series | None = None


class Metrics(Spec):
    port: int
    path: str = "/metrics"
    # The gauge of requests the engine is working on (a stop waits for it to reach 0);
    # None: the endpoint exists, its names are not ours
    running: str | None = None
    # The gauge of requests queued in the engine, not yet running: in flight too (a drain
    # waits for them as well; a stream queued there is cut if the engine stops)
    waiting: str | None = None


class Unit(Spec):
    """One process of a deployment: where it runs, exactly what it runs, how to check it."""

    name: str  # unique within a deployment, e.g. decode-0 or decode-0-node1
    role: UnitRole
    replica: NonNegativeInt
    node: NonNegativeInt  # node rank inside a replica that spans hosts; 0 otherwise
    engine: str  # vllm, sglang, sim, sglang-router, vllm-router
    host: str
    address: str
    argv: list[str]  # never a shell string
    env: dict[str, str]
    port: int | None  # HTTP port; None for a secondary node of a multi-node replica
    gpus: NonNegativeInt  # GPUs this process stands for
    gpu_indices: list[int]  # GPU indices on its host
    # CPU cores the process (and all it starts) may run on: vLLM's CPU build, whose replica owns
    # its cores as another owns its GPUs. Empty: wherever the host schedules it.
    cpus: list[int] = []
    bootstrap_port: int | None = None  # a prefill unit's KV bootstrap port (router P/D)
    readiness: Probe | None = None
    health: Probe | None = None
    metrics: Metrics | None = None
    flag_table: str | None = None  # the engine version whose flags the argv was checked against
    # Started again by the host agent's supervisor as soon as it exits, not at the reconciler's
    # next pass: the router, the one endpoint clients connect to.
    restart: bool = False
    # The replica's hosts, node 0's first, when this one process stands for a replica that
    # spans several (the simulator): a scheduler's job holds all of them for it.
    hosts: list[str] = []
    # The other nodes' processes of that replica, by host, when one scheduler's job runs them
    # all (a Slurm fleet): each node's task runs its own.
    node_argv: dict[str, list[str]] = {}
