"""Pure logic: SGLang's engine card — every part reconciler/engines/cards.py `EngineCard`
names, from the argv builder (argv.py) and the flag tables (flags.py), and the parts that
are only SGLang's: its image, sglang-router for P/D pools (with each prefill worker's
bootstrap port), its metric names for the rollout alarms, the simulator's profile of its
scheduler, the optimizer's feasibility check."""

from __future__ import annotations

import math
from collections.abc import Sequence

from reconciler.engines.base import check_args, health, parallel_where
from reconciler.engines.model.levers import Limits, chunk_size, flag_value
from reconciler.engines.router import SGLANG_ROUTER, sglang_pd_routes
from reconciler.engines.sglang import argv
from reconciler.engines.units import EngineSeries, Series, Unit
from reconciler.spec.catalog import Hardware
from reconciler.spec.recipe import Recipe, Settings

# The argv builder's parts (argv.py), under the names EngineCard gives them.
MANAGED, TABLES, table, units = argv.MANAGED, argv.TABLES, argv.table, argv.units
check_hardware = argv.check_hardware
__all__ = ["health"]  # the probe every OpenAI-compatible engine answers (base.py)

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
    requests=Series("sglang:num_requests_total"),
    metrics={
        "ttft": Series("sglang:time_to_first_token_seconds"),
        "itl": Series("sglang:inter_token_latency_seconds"),
        "e2e": Series("sglang:e2e_request_latency_seconds"),
        "queue_time": Series("sglang:queue_time_seconds"),
        "waiting": Series("sglang:num_queue_reqs"),
        "kv_usage": Series("sglang:token_usage"),
        "error_rate": Series("sglang:num_aborted_requests_total"),
    },
    prompt_tokens=Series("sglang:prompt_tokens_total"),
    generation_tokens=Series("sglang:generation_tokens_total"),
)

# SGLang 0.5.9's admission reservation (PyPI wheel sglang-0.5.9 = tag v0.5.9):
# srt/environ.py:225-229 SGLANG_INIT_NEW_TOKEN_RATIO 0.7, SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR 0.14,
# SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS 600, SGLANG_RETRACT_DECODE_STEPS 20,
# SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION 4096; managers/scheduler.py:811-823 derives the floor
# (0.7 × 0.14) and the decay per decode step ((0.7 − floor) / 600).
NEW_TOKEN_RATIO = 0.7
MIN_NEW_TOKEN_RATIO = NEW_TOKEN_RATIO * 0.14
NEW_TOKEN_RATIO_DECAY = (NEW_TOKEN_RATIO - MIN_NEW_TOKEN_RATIO) / 600
CLIP_MAX_NEW_TOKENS = 4096
RETRACT_DECODE_STEPS = 20
# managers/schedule_policy.py:74; the check that uses it: 636-690, taken for ignore_eos requests
# when the radix cache is off (731-732) — as in every InferenceX run (`--ignore-eos`).
IGNORE_EOS_RESERVE_TOKENS = 1


def sim_limits(settings: Settings, hardware: Hardware, args: Sequence[str]) -> Limits:
    """SGLang 0.5: --chunked-prefill-size 8192 under 160 GB, else 16384; --max-prefill-tokens
    16384; prefill batches run apart from decode (no mixed chunk); its request pool is sized
    from KV memory, which the scheduler enforces, so the count cap is 4096, and admission
    keeps room for the new request's output and a decaying share (0.7 down to 0.098) of the
    running requests', each capped at 4096 tokens; KV short in decode retracts the requests
    with the fewest output tokens, and a refusal holds admission until a request leaves
    (managers/scheduler.py, schedule_policy.py, schedule_batch.py). CUDA graphs capture decode
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
    return Limits(
        max_batch,
        budget,
        chunk,
        False,
        graphs or 512,
        NEW_TOKEN_RATIO,
        poll,
        reserve_decay=NEW_TOKEN_RATIO_DECAY,
        reserve_floor=MIN_NEW_TOKEN_RATIO,
        reserve_clip=CLIP_MAX_NEW_TOKENS,
        retract_decode_steps=RETRACT_DECODE_STEPS,
        hold_after_refusal=True,
        end_reserve_tokens=IGNORE_EOS_RESERVE_TOKENS,
    )


def check_recipe(recipe: Recipe, largest_host: int) -> None:
    flags = table(recipe.engine.version)
    argv.settings_flags(recipe.settings, flags)
    for role, pool in recipe.topology.pools():
        nodes = math.ceil(pool.gpus / largest_host)
        argv.parallel(pool.parallel, nodes, parallel_where(role), flags)
        argv.check_pool(recipe.settings, pool.parallel, parallel_where(role), flags)
    check_args(recipe.args, flags, MANAGED)
