"""Pure logic: the router — one endpoint per deployment, in front of its replicas' node-0
units, on no GPUs.

sglang-router (flags as of 0.3.2) routes aggregated replicas of any engine. Prefill/decode
pools get the router their engine's card names (`PD_ROUTER`, `pd_routes`): sglang-router for
pools that speak SGLang's bootstrap protocol (SGLang, the simulator), vllm-router for vLLM's.

Both count every answer that is not a 2xx, a client's 404 for a model it misspelt included,
as a failure of the worker that gave it, and open that worker's circuit after
`--cb-failure-threshold` of them (default 10 in 120 s, open 60 s): one careless client then
takes every worker out, and good clients get 503s. No flag tells them to count only 5xx, so
the circuit breaker is off. A worker that really fails is left out by the router's own health
check (every `HEALTH_INTERVAL_S`, out after 3 failures), its 5xx retried on another worker,
and an engine that is not ready is taken out of the router by the reconciler.
"""

from __future__ import annotations

from typing import NamedTuple

from reconciler.engines.base import url
from reconciler.engines.cards import card, cards
from reconciler.engines.placement import ROUTER_METRICS, Placement
from reconciler.engines.units import EngineContext, Metrics, Probe, Unit


class Router(NamedTuple):
    """A router package: its PyPI name (also its units' `engine`), the pinned version, and
    the module that launches it."""

    package: str
    version: str
    module: str


SGLANG_ROUTER = Router("sglang-router", "0.3.2", "sglang_router.launch_router")

# Never open a circuit: client errors count as failures (see above).
RESILIENCE = ["--disable-circuit-breaker"]
HEALTH_INTERVAL_S = 10  # the router's health check of each worker (its default: 60 s)


def router_packages() -> dict[str, str]:
    """Every router denv may run, by package, with its pinned version."""
    routers = [SGLANG_ROUTER, *(c.PD_ROUTER for c in cards().values())]
    return {r.package: r.version for r in routers}


def worker_url(unit: Unit) -> str:
    assert unit.port is not None
    return url(unit.address, unit.port)


def sglang_pd_routes(prefill: list[Unit], decode: list[Unit]) -> list[str]:
    """sglang-router's P/D workers: each prefill worker with its KV bootstrap port."""
    routes = ["--pd-disaggregation"]
    for u in prefill:
        routes += ["--prefill", worker_url(u), str(u.bootstrap_port)]
    return routes + [part for u in decode for part in ("--decode", worker_url(u))]


def router_unit(engine: str, units: list[Unit], placement: Placement, ctx: EngineContext) -> Unit:
    """The router in front of `units` (those of one deployment, run by `engine`)."""
    slot = placement.router
    workers = [u for u in units if u.port is not None]
    prefill = [u for u in workers if u.role == "prefill"]
    decode = [u for u in workers if u.role == "decode"]
    if prefill:
        engine_card = card(engine)
        router = engine_card.PD_ROUTER
        routes = engine_card.pd_routes(prefill, decode)
    else:
        router = SGLANG_ROUTER
        routes = ["--worker-urls", *map(worker_url, workers)]
    name, module = router.package, router.module
    metrics = slot.port + ROUTER_METRICS
    argv = [ctx.engine_python, "-m", module, "--host", slot.address, "--port", str(slot.port)]
    argv += [*routes, "--policy", ctx.router_policy, *RESILIENCE]
    argv += ["--health-check-interval-secs", str(HEALTH_INTERVAL_S)]
    argv += ["--prometheus-host", slot.address, "--prometheus-port", str(metrics)]
    return Unit(
        name="router",
        role="router",
        replica=0,
        node=0,
        engine=name,
        host=slot.host,
        address=slot.address,
        argv=argv,
        env={},
        port=slot.port,
        gpus=0,
        gpu_indices=[],
        readiness=Probe(path="/readiness", status=200),
        health=Probe(path="/health", status=200),
        metrics=Metrics(port=metrics),
        restart=True,  # clients are refused while it is down: never wait for the next pass
    )
