"""Pure logic: SGLang's engine card — every part reconciler/engines/cards.py `EngineCard`
names, from the argv builder (argv.py) and the flag tables (flags.py), and the parts that
are only SGLang's: its image, sglang-router for P/D pools (with each prefill worker's
bootstrap port), its metric names for the rollout alarms, the simulator's profile of its
scheduler, the optimizer's feasibility check."""

from __future__ import annotations

import math
from collections.abc import Sequence

from reconciler.engines.base import check_args, parallel_where
from reconciler.engines.router import SGLANG_ROUTER, sglang_pd_routes
from reconciler.engines.sglang.argv import (
    MANAGED,
    TABLES,
    check_hardware,
    check_pool,
    health,
    metric_names,
    parallel,
    settings_flags,
    table,
    units,
)
from reconciler.engines.sim.levers import Limits, chunk_size, flag_value
from reconciler.engines.units import EngineSeries, Series, Unit
from reconciler.spec.catalog import Hardware
from reconciler.spec.recipe import Recipe, Settings

__all__ = ["MANAGED", "TABLES", "check_hardware", "health", "metric_names", "table", "units"]

IMAGE = "lmsysorg/sglang:v{version}"
EXTRA_INDEX: tuple[str, ...] = ()  # none for the versions denv knows
BUILDS: dict[str, tuple[str, tuple[str, ...]]] = {}
SCRIPTS: dict[tuple[str, ...], tuple[str, ...]] = {}  # argv.py writes `python3 -m …` itself

PD_ROUTER = SGLANG_ROUTER


def pd_routes(prefill: list[Unit], decode: list[Unit]) -> list[str]:
    return sglang_pd_routes(prefill, decode)


# Names read from SGLang's `srt/metrics/collector.py`. SGLang has no per-request TPOT
# histogram, and counts finished and aborted requests apart.
ALARM_SERIES = EngineSeries(
    histograms={
        "ttft": Series("sglang:time_to_first_token_seconds"),
        "itl": Series("sglang:inter_token_latency_seconds"),
        "e2e": Series("sglang:e2e_request_latency_seconds"),
        "queue_time": Series("sglang:queue_time_seconds"),
    },
    gauges={
        "queue": Series("sglang:num_queue_reqs"),
        "kv_usage": Series("sglang:token_usage"),
    },
    requests=Series("sglang:num_requests_total"),
    errors=Series("sglang:num_aborted_requests_total"),
)

# SGLang admits a request only while KV holds the running requests' remaining output times
# this ratio (SGLANG_INIT_NEW_TOKEN_RATIO; the engine lets it decay while nothing is retracted,
# denv keeps the starting value).
NEW_TOKEN_RATIO = 0.7


def sim_limits(settings: Settings, hardware: Hardware, args: Sequence[str]) -> Limits:
    """SGLang 0.5: --chunked-prefill-size 8192 under 160 GB, else 16384; --max-prefill-tokens
    16384; prefill batches run apart from decode (no mixed chunk); its request pool is sized
    from KV memory, which the scheduler enforces, so the count cap is 4096, and admission
    keeps room for 0.7 of the running requests' remaining output. CUDA graphs capture decode
    batches up to 512. Extra engine args that change these are honoured:
    --scheduler-recv-interval, --num-continuous-decode-steps, --cuda-graph-max-bs(-decode)."""
    default_chunk = 8192 if hardware.memory_gb < 160 else 16384
    chunk = chunk_size(settings.chunked_prefill, default_chunk)
    budget = settings.max_batched_tokens or max(16384, chunk or 0)
    chunk = None if chunk is None else min(chunk, budget)
    graphs = flag_value(args, "--cuda-graph-max-bs-decode") or flag_value(
        args, "--cuda-graph-max-bs"
    )
    poll = max(
        flag_value(args, "--scheduler-recv-interval") or 1,
        flag_value(args, "--num-continuous-decode-steps") or 1,
    )
    max_batch = settings.max_batch or 4096
    return Limits(max_batch, budget, chunk, False, graphs or 512, NEW_TOKEN_RATIO, poll)


def check_recipe(recipe: Recipe, largest_host: int) -> None:
    flags = table(recipe.engine.version)
    settings_flags(recipe.settings, flags)
    for role, pool in recipe.topology.pools():
        nodes = math.ceil(pool.gpus / largest_host)
        parallel(pool.parallel, nodes, parallel_where(role), flags)
        check_pool(recipe.settings, pool.parallel, parallel_where(role), flags)
    check_args(recipe.args, flags, MANAGED)
