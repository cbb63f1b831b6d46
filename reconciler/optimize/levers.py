"""Pure logic: the optimizer's levers — each a named, finite set of choices (the current
recipe's value first) — and how one choice per lever reads as a topology and settings.

Choices are plain scalars (str, int, bool, None), so optuna stores them as they are and a
study's parameters read the same on every worker. All are categorical: the values of a lever
are few, and a layout names tensor parallelism and replicas together so that each choice fits
the GPU budget by itself.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from reconciler.spec.recipe import (
    AggregatedTopology,
    DisaggregatedTopology,
    Parallel,
    Pool,
    Recipe,
    Settings,
)

Value = str | int | bool | None
Choices = Mapping[str, Value]

ENGINE = "engine"
MODE = "mode"
# Layouts read 'tp4 ×2': replicas of a tensor-parallel size, one lever per pool, so that every
# choice fits the GPU budget on its own. A recipe's own data-parallel replica (vLLM's
# `--data-parallel-size 8` beside expert parallel) reads 'tp1 dp8 ×1' and stays a choice.
LAYOUT = "layout"
PREFILL = "prefill"
DECODE = "decode"
EP = "ep"
DP_ATTENTION = "dp_attention"
MAX_BATCH = "max_batch"
MAX_BATCHED_TOKENS = "max_batched_tokens"
CHUNKED_PREFILL = "chunked_prefill"
CUDA_GRAPHS = "cuda_graphs"
SPECULATIVE = "speculative"
KV_DTYPE = "kv_dtype"
PREFIX_CACHING = "prefix_caching"
KV_OFFLOAD = "kv_offload"
QUANTIZATION = "quantization"

# Names a caller may give to search a part of the space; each stands for its levers.
GROUPS: dict[str, tuple[str, ...]] = {
    "engine": (ENGINE,),
    "parallel": (LAYOUT, EP, DP_ATTENTION),
    "disaggregated": (MODE, PREFILL, DECODE),
    "settings": (MAX_BATCH, MAX_BATCHED_TOKENS, CHUNKED_PREFILL, CUDA_GRAPHS),
    "speculative": (SPECULATIVE,),
    "kv": (KV_DTYPE, PREFIX_CACHING, KV_OFFLOAD),
    "quantization": (QUANTIZATION,),
}
ALL_LEVERS: tuple[str, ...] = tuple(name for names in GROUPS.values() for name in names)

MAX_BATCH_CHOICES = (32, 64, 128, 256, 512, 1024)
BATCHED_TOKEN_CHOICES = (2048, 4096, 8192, 16384, 32768)
DRAFT_TOKEN_CHOICES = (1, 2, 3, 4)
NGRAM_DRAFT_CHOICES = (2, 4)
# CPU memory a KV offload candidate asks for, per engine (vLLM needs a size; SGLang takes one).
OFFLOAD_GB = 64.0


@dataclass(frozen=True)
class Lever:
    name: str
    choices: tuple[Value, ...]  # the current recipe's value first
    mode: str | None = None  # only searched when the topology mode is this one


@dataclass(frozen=True)
class SpecOption:
    """A speculative method the model has a recipe for, and its draft model if it needs one."""

    method: str
    draft_model: str | None = None


def _same(a: Value, b: Value) -> bool:
    return a == b and type(a) is type(b)  # True is not 1 here


def unique(values: Sequence[Value]) -> tuple[Value, ...]:
    out: list[Value] = []
    for value in values:
        if not any(_same(value, seen) for seen in out):
            out.append(value)
    return tuple(out)


def offers(lever: Lever, value: Value) -> bool:
    return any(_same(value, choice) for choice in lever.choices)


def powers_of_two(up_to: int) -> list[int]:
    out, n = [], 1
    while n <= up_to:
        out.append(n)
        n *= 2
    return out


# ------------------------------------------------------------------ current values
def current_values(recipe: Recipe) -> dict[str, Value]:
    """Each lever's value for the recipe as it is."""
    s, topology = recipe.settings, recipe.topology
    values: dict[str, Value] = {
        ENGINE: None,  # filled by the space: the engine option's label
        MODE: topology.mode,
        MAX_BATCH: s.max_batch,
        MAX_BATCHED_TOKENS: s.max_batched_tokens,
        CHUNKED_PREFILL: s.chunked_prefill,
        CUDA_GRAPHS: s.cuda_graphs,
        SPECULATIVE: speculative_label(s),
        KV_DTYPE: s.kv_cache.dtype,
        PREFIX_CACHING: s.kv_cache.prefix_caching,
        KV_OFFLOAD: s.kv_cache.offload,
        QUANTIZATION: s.quantization,
    }
    # The other mode's levers start from the same per-replica layout, one replica a pool.
    if isinstance(topology, AggregatedTopology):
        p = topology.parallel
        one = pool_label(p, 1)
        values.update({LAYOUT: pool_label(p, topology.replicas), PREFILL: one, DECODE: one})
    else:
        p = topology.decode.parallel
        values.update(
            {
                LAYOUT: pool_label(p, 1),
                PREFILL: pool_label(topology.prefill.parallel, topology.prefill.replicas),
                DECODE: pool_label(p, topology.decode.replicas),
            }
        )
    values.update({EP: ep_value(p), DP_ATTENTION: p.dp_attention})
    return values


def speculative_label(settings: Settings) -> str:
    spec = settings.speculative
    return "none" if spec.method == "none" else f"{spec.method}:{spec.draft_tokens}"


# ------------------------------------------------------------------ what choices mean
def layout_label(tp: int, replicas: int, dp: int = 1) -> str:
    return f"tp{tp} ×{replicas}" if dp == 1 else f"tp{tp} dp{dp} ×{replicas}"


def pool_label(parallel: Parallel, replicas: int) -> str:
    """The layout of `replicas` of `parallel`: its data parallel counted where it adds GPUs
    (attention DP runs inside the TP group)."""
    return layout_label(parallel.tp, replicas, 1 if parallel.dp_attention else parallel.dp)


def parse_layout(label: Value) -> tuple[int, int, int]:
    """(tp, dp, replicas) of 'tp4 ×2' or 'tp1 dp8 ×1'; ValueError for anything else."""
    found = re.fullmatch(r"tp(\d+)(?: dp(\d+))? ×(\d+)", str(label))
    if found is None:
        raise ValueError(f"not a layout: {label!r} (e.g. 'tp4 ×2')")
    tp, dp, replicas = found.groups()
    return int(tp), int(dp or 1), int(replicas)


def layouts(tps: Sequence[int], gpus: int) -> list[str]:
    """Every 'tp ×replicas' of at most `gpus` GPUs, smallest replicas first."""
    return [layout_label(tp, n) for tp in tps for n in range(1, gpus // tp + 1)]


def ep_value(parallel: Parallel) -> bool | int:
    """The EP lever's value: on (experts over every GPU of the replica), off, or a recipe's
    own degree in between (TP 8 with EP 2, say), kept as it is."""
    if parallel.ep == 1:
        return False
    return True if parallel.ep == parallel.gpus else parallel.ep


def _ep(value: Value, width: int) -> int:
    if isinstance(value, bool) or value is None:
        return width if value else 1
    return int(value)


def topology_of(values: Choices) -> AggregatedTopology | DisaggregatedTopology:
    """The topology the choices name. ValueError (pydantic's) when it is not a valid one.
    Pipeline parallelism is not a lever: candidates run pp 1."""
    ep, dpa = values.get(EP), bool(values.get(DP_ATTENTION))
    if values.get(MODE) == "disaggregated":
        prefill = _pool(values.get(PREFILL), ep, dpa)
        decode = _pool(values.get(DECODE), ep, dpa)
        return DisaggregatedTopology(mode="disaggregated", prefill=prefill, decode=decode)
    pool = _pool(values.get(LAYOUT), ep, dpa)
    return AggregatedTopology(
        mode="aggregated", replicas=pool.replicas, gpus=pool.gpus, parallel=pool.parallel
    )


def _pool(label: Value, ep: Value, dpa: bool) -> Pool:
    tp, dp, replicas = parse_layout(label)
    if dp > 1:  # data parallel replicas of their own: experts spread over all of them
        parallel = Parallel(tp=tp, dp=dp, ep=_ep(ep, tp * dp))
        return Pool(replicas=replicas, gpus=parallel.gpus, parallel=parallel)
    dpa = dpa and tp > 1
    parallel = Parallel(tp=tp, dp=tp if dpa else 1, ep=_ep(ep, tp), dp_attention=dpa)
    return Pool(replicas=replicas, gpus=parallel.gpus, parallel=parallel)


def settings_patch(
    values: Choices, current: Settings, drafts: Mapping[str, str | None]
) -> dict[str, Any]:
    """The settings the choices change, as a partial recipe's `settings` (nested dicts).
    `drafts` gives each speculative method's draft model."""
    patch: dict[str, Any] = {}
    kv: dict[str, Any] = {}
    plain = {MAX_BATCH: "max_batch", MAX_BATCHED_TOKENS: "max_batched_tokens"}
    plain |= {CHUNKED_PREFILL: "chunked_prefill", CUDA_GRAPHS: "cuda_graphs"}
    plain |= {QUANTIZATION: "quantization"}
    for lever, field in plain.items():
        if lever in values and values[lever] != getattr(current, field):
            patch[field] = values[lever]
    if KV_DTYPE in values and values[KV_DTYPE] != current.kv_cache.dtype:
        kv["dtype"] = values[KV_DTYPE]
    if PREFIX_CACHING in values and values[PREFIX_CACHING] != current.kv_cache.prefix_caching:
        kv["prefix_caching"] = values[PREFIX_CACHING]
    if KV_OFFLOAD in values and values[KV_OFFLOAD] != current.kv_cache.offload:
        offload = values[KV_OFFLOAD]
        kv["offload"] = offload
        kv["offload_gb"] = OFFLOAD_GB if offload == "cpu" else None
    if kv:
        patch["kv_cache"] = kv
    label = values.get(SPECULATIVE)
    if isinstance(label, str) and label != speculative_label(current):
        # The whole block: a method left from the current recipe must not outlive its drafts.
        method, _, tokens = label.partition(":")
        patch["speculative"] = {
            "method": method,
            "draft_tokens": int(tokens) if tokens else None,
            "draft_model": drafts.get(method),
        }
    return patch


def speculative_choices(current: str, options: Sequence[SpecOption]) -> tuple[Value, ...]:
    """Off, n-gram lookup, and each method the model has a recipe for, at a few draft lengths."""
    labels: list[Value] = [current, "none"]
    for option in options:
        lengths = NGRAM_DRAFT_CHOICES if option.method == "ngram" else DRAFT_TOKEN_CHOICES
        labels += [f"{option.method}:{n}" for n in lengths]
    return unique(labels)
