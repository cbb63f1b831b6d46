"""Pure logic: the router — one endpoint per deployment, in front of its replicas' node-0
units, on no GPUs.

sglang-router (flags as of 0.3.2) routes aggregated replicas of any engine, and P/D pools
that speak SGLang's bootstrap protocol (SGLang, the simulator). vLLM's P/D pools need a
router that moves NIXL KV-transfer parameters between prefill and decode: vllm-router
(0.1.17), which takes the same flags with `--vllm-pd-disaggregation`.

Both count every answer that is not a 2xx, a client's 404 for a model it misspelt included,
as a failure of the worker that gave it, and open that worker's circuit after
`--cb-failure-threshold` of them (default 10 in 120 s, open 60 s): one careless client then
takes every worker out, and good clients get 503s. No flag tells them to count only 5xx, so
the circuit breaker is off. A worker that really fails is left out by the router's own health
check (every `HEALTH_INTERVAL_S`, out after 3 failures), its 5xx retried on another worker,
and an engine that is not ready is taken out of the router by the reconciler.
"""

from __future__ import annotations

from reconciler.engines.base import url
from reconciler.engines.placement import ROUTER_METRICS, Placement
from reconciler.engines.units import EngineContext, Metrics, Probe, Unit

# Never open a circuit: client errors count as failures (see above).
RESILIENCE = ["--disable-circuit-breaker"]
HEALTH_INTERVAL_S = 10  # the router's health check of each worker (its default: 60 s)


def _url(unit: Unit) -> str:
    assert unit.port is not None
    return url(unit.address, unit.port)


def router_unit(engine: str, units: list[Unit], placement: Placement, ctx: EngineContext) -> Unit:
    """The router in front of `units` (those of one deployment, run by `engine`)."""
    slot = placement.router
    workers = [u for u in units if u.port is not None]
    prefill = [u for u in workers if u.role == "prefill"]
    decode = [u for u in workers if u.role == "decode"]
    if prefill and engine == "vllm":
        name, module = "vllm-router", "vllm_router.launch_router"
        routes = ["--vllm-pd-disaggregation"]
        routes += [part for u in prefill for part in ("--prefill", _url(u))]
        routes += [part for u in decode for part in ("--decode", _url(u))]
        routes += ["--kv-connector", "nixl"]
    elif prefill:
        name, module = "sglang-router", "sglang_router.launch_router"
        routes = ["--pd-disaggregation"]
        for u in prefill:
            routes += ["--prefill", _url(u), str(u.bootstrap_port)]
        routes += [part for u in decode for part in ("--decode", _url(u))]
    else:
        name, module = "sglang-router", "sglang_router.launch_router"
        routes = ["--worker-urls", *map(_url, workers)]
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
