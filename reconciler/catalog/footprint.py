"""Pure logic: what a model weighs on GPUs — bytes per weight and per KV value by format, the
split of parameters into dense and routed-expert ones, KV bytes per token, attention FLOPs,
and how a replica's GPUs divide one engine's work. The simulator (engines/model/perf.py) and the
roofline (roofline.py) both read them here; docs/simulator.md explains every constant."""

from __future__ import annotations

import math
from dataclasses import dataclass

from reconciler.spec.catalog import ModelArch
from reconciler.spec.recipe import Parallel

GB = 1e9

# Bytes per parameter and the tensor-core format GEMMs run in, by recipe quantization.
# Block-scaled formats carry their scales: NVFP4 one fp8 scale per 16 values (4.5 bits),
# MXFP4 one e8m0 scale per 32 (4.25 bits), AWQ/GPTQ/int4 one fp16 scale per 128 (4.125 bits).
# Weight-only formats (int4, AWQ, GPTQ) dequantise to bf16 and compute there.
WEIGHT_FORMATS: dict[str, tuple[float, str]] = {
    "none": (2.0, "bf16"),
    "fp8": (1.0, "fp8"),
    "w8a8_fp8": (1.0, "fp8"),
    "fp4": (0.5625, "fp4"),
    "nvfp4": (0.5625, "fp4"),
    "mxfp4": (0.53125, "fp4"),
    "int4": (0.515625, "bf16"),
    "awq": (0.515625, "bf16"),
    "gptq": (0.515625, "bf16"),
}

# KV cache bytes per value; `auto` follows the model dtype (bf16 for every catalog model).
KV_DTYPE_BYTES: dict[str, float] = {
    "auto": 2.0,
    "bf16": 2.0,
    "fp8": 1.0,
    "fp8_e4m3": 1.0,
    "fp8_e5m2": 1.0,
}


def split_params(arch: ModelArch) -> tuple[float, float]:
    """(non-expert, routed-expert) parameters. With E experts of which k run per token,
    active = dense + expert × k / E, so expert = (total - active) / (1 - k / E)."""
    total = arch.params_b * GB
    if not (arch.experts and arch.experts_per_token and arch.active_params_b):
        return total, 0.0
    share = arch.experts_per_token / arch.experts
    expert = (arch.params_b - arch.active_params_b) * GB / (1.0 - share)
    return total - expert, expert


def expert_miss(arch: ModelArch) -> float:
    """1 - k / E: the chance one token skips a given routed expert; 0 for a dense model."""
    if arch.experts and arch.experts_per_token:
        return 1.0 - arch.experts_per_token / arch.experts
    return 0.0


def kv_bytes_per_token(arch: ModelArch, value_bytes: float) -> float:
    """KV bytes of one token over all layers: 2 × layers × kv_heads × head_dim × bytes, or
    for MLA layers × (kv_lora_rank + qk_rope_head_dim) × bytes."""
    if arch.kv_lora_rank is not None:
        return arch.layers * (arch.kv_lora_rank + (arch.qk_rope_head_dim or 0)) * value_bytes
    return 2.0 * arch.layers * arch.kv_heads * arch.head_dim * value_bytes


def kv_bytes_per_rank_gpu(arch: ModelArch, kv_token: float, attn_tp: int) -> float:
    """KV bytes of one token on each GPU of the attention rank that holds it: GQA's KV heads
    shard over the rank's `attn_tp` GPUs (a head is never split), MLA's latent is held whole
    by every one of them."""
    if arch.kv_lora_rank is None:
        return kv_token * math.ceil(arch.kv_heads / attn_tp) / arch.kv_heads
    return kv_token


def kv_token_bytes(arch: ModelArch, kv_dtype: str | None, attn_tp: int) -> tuple[float, float]:
    """(KV bytes of one token over all layers, on each GPU of the attention rank holding it)
    for a KV cache dtype; None or a dtype not in KV_DTYPE_BYTES: the model's own (bf16)."""
    kv_token = kv_bytes_per_token(arch, KV_DTYPE_BYTES.get(kv_dtype or "auto", 2.0))
    return kv_token, kv_bytes_per_rank_gpu(arch, kv_token, attn_tp)


def experts_touched(miss: float, tokens: float) -> float:
    """The share of its routed experts a step of `tokens` tokens reads, each token picking k
    of E independently: 1 - (1 - k/E)^tokens (`miss`: `expert_miss`)."""
    return 1.0 - math.pow(miss, tokens)


def attention_flops_per_pair(arch: ModelArch) -> float:
    """Attention FLOPs per (query token, context token) pair per unit of head width:
    4 × layers × heads (QKᵀ and PV, a multiply-add each); times the head width used."""
    return 4.0 * arch.layers * arch.attention_heads


@dataclass(frozen=True)
class Layout:
    """How one replica's GPUs divide the work of each of its engines."""

    tp: int
    pp: int
    engines: int  # independent engines: data parallel ranks that share nothing
    attn_ranks: int  # ranks that attend to their own requests within one engine
    attn_tp: int  # GPUs one attention rank's heads are split over
    group: int  # GPUs one engine's MoE and GEMM work is spread over

    @classmethod
    def of(cls, parallel: Parallel) -> Layout:
        tp, dp = parallel.tp, parallel.dp
        if parallel.dp_attention:  # SGLang: DP attention ranks inside the TP group
            return cls(tp, parallel.pp, 1, dp, max(tp // dp, 1), tp)
        if dp > 1 and parallel.ep > tp:  # vLLM: DP attention ranks, experts over all of them
            return cls(tp, parallel.pp, 1, dp, tp, tp * dp)
        return cls(tp, parallel.pp, dp, 1, tp, tp)
