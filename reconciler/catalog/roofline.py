"""Pure logic: the roofline of a benchmark result — what share of the deployment's HBM
bandwidth its decode figures imply, and what share of its tensor compute its prefill figures
imply, from the hardware's specs and the model's architecture (docs/benchmarks.md, Roofline).

Every GPU of the deployment counts, prefill GPUs included (as tok/s/GPU does), so the two
shares are of the same whole. Decode, per step of TPOT p50 seconds:

    bytes = copies × (dense × dense_reads + experts × (1 − (1 − k/E)^(batch / copies))) × B/param
          + batch × context × KV bytes/token × kv_reads
    share = bytes ÷ TPOT ÷ (GPUs × HBM TB/s)

Prefill, per second:

    FLOPs/token = 2 × active params + 4 × layers × heads × head_dim × mean ISL / 2
    share = prefilled tok/s × FLOPs/token ÷ (GPUs × dense peak TFLOPS of the precision)
"""

from __future__ import annotations

from typing import Literal

from reconciler.catalog import footprint
from reconciler.spec.base import Spec
from reconciler.spec.catalog import Hardware, ModelArch
from reconciler.spec.recipe import (
    AggregatedTopology,
    DisaggregatedTopology,
    Parallel,
    total_gpus,
)
from reconciler.spec.repo import Repo
from reconciler.spec.result import Result

TERA = 1e12
GB = 1e9
# A wider format's peak stands in where the GPU has no tensor cores for the narrower one.
WIDER = {"fp4": ("fp4", "fp8", "bf16"), "fp8": ("fp8", "bf16"), "bf16": ("bf16",)}
# Result precisions that name the model's own 16-bit weights.
SIXTEEN_BIT = {None, "bf16", "fp16", "bfloat16", "float16", "none"}


class DecodeRoofline(Spec):
    """What one decode step reads, over the whole deployment, and the share it implies."""

    fraction: float  # of every GPU's HBM bandwidth together
    tpot_ms: float  # one step (TPOT p50)
    batch: float  # requests decoding at once, deployment-wide
    batch_from: Literal["output tok/s × TPOT", "concurrency"]
    copies: int  # model copies that decode, each reading its weights every step
    tokens_per_copy: float  # batch / copies: tokens each copy's experts see per step
    dense_reads: int  # attention ranks of one copy, each holding the dense weights whole
    weight_bytes_per_param: float
    context_tokens: float  # KV tokens a request attends to on average: ISL + OSL / 2
    kv_bytes_per_token: float  # whole model, one token
    kv_reads: float  # GPUs reading one token's KV, in copies (MLA's latent is whole per GPU)
    weight_bytes: float  # per step, every copy
    kv_bytes: float  # per step, every request
    bytes_per_step: float
    implied_tb_s: float  # bytes_per_step / TPOT


class PrefillRoofline(Spec):
    """The FLOPs prefill does per second, over the whole deployment, and the share they imply."""

    fraction: float  # of every GPU's dense peak in `peak_format` together
    tokens_s: float  # prompt tokens computed per second, deployment-wide
    tokens_from: Literal["total − output tok/s", "output tok/s × ISL / OSL"]
    gemm_flops_per_token: float  # 2 × active params
    attention_flops_per_token: float  # 4 × layers × heads × head_dim × mean ISL / 2
    flops_per_token: float
    peak_format: str  # bf16, fp8 or fp4
    peak_tflops: float  # per GPU
    implied_tflops: float  # tokens_s × flops_per_token / 10^12


class Roofline(Spec):
    result: str
    hardware: str | None = None  # the catalog id the result's key resolved to
    gpus: int | None = None  # every GPU of the deployment
    hbm_tb_s: float | None = None  # per GPU
    decode: DecodeRoofline | None = None
    decode_missing: str | None = None  # why `decode` is None
    prefill: PrefillRoofline | None = None
    prefill_missing: str | None = None  # why `prefill` is None
    assumptions: list[str] = []


def weight_format(precision: str | None) -> str | None:
    """The WEIGHT_FORMATS key a result's precision names; None when it is not one."""
    if precision in SIXTEEN_BIT:
        return "none"
    return precision if precision in footprint.WEIGHT_FORMATS else None


def mean_length(nominal: int, ratio: float | None) -> float:
    """Lengths drawn uniformly from ratio × nominal to nominal average (1 + ratio) / 2 of it."""
    return nominal * (1.0 + (ratio if ratio is not None else 1.0)) / 2.0


def roofline(
    result: Result,
    hardware: Hardware | None,
    arch: ModelArch | None,
    kv_dtype: str | None = None,
) -> Roofline:
    """The roofline of `result` on `hardware` for `arch`. `kv_dtype` is the KV cache dtype of
    the result's recipe when one is known; None takes the model's (bf16)."""
    gpus = result.gpus or (total_gpus(result.topology) if result.topology else None)
    base = Roofline(result=result.id, gpus=gpus)
    missing = _missing(result, hardware, arch, gpus)
    if missing is not None or hardware is None or arch is None or gpus is None:
        return base.model_copy(update={"decode_missing": missing, "prefill_missing": missing})
    assumptions: list[str] = []
    fmt = weight_format(result.precision)
    decode, decode_missing = _decode(result, hardware, arch, gpus, kv_dtype, fmt, assumptions)
    prefill, prefill_missing = _prefill(result, hardware, arch, gpus, fmt, assumptions)
    return base.model_copy(
        update={
            "hardware": hardware.id,
            "hbm_tb_s": hardware.hbm_tb_s,
            "decode": decode,
            "decode_missing": decode_missing,
            "prefill": prefill,
            "prefill_missing": prefill_missing,
            "assumptions": assumptions,
        }
    )


def _missing(
    result: Result, hardware: Hardware | None, arch: ModelArch | None, gpus: int | None
) -> str | None:
    if hardware is None:
        return f"hardware {result.hardware} is not in catalog/hardware.yaml"
    if arch is None:
        return f"model {result.model} is not in catalog/models.yaml"
    if gpus is None:
        return "the result gives neither its GPUs nor its topology"
    if weight_format(result.precision) is None:
        return f"precision {result.precision} is not a known weight format"
    return None


def _decode_parallel(
    result: Result, hardware: Hardware, gpus: int, assumptions: list[str]
) -> tuple[int, Parallel] | str:
    """(replicas, parallel) of the GPUs that decode, or why they are unknown."""
    topology = result.topology
    if isinstance(topology, DisaggregatedTopology):
        return topology.decode.replicas, topology.decode.parallel
    if isinstance(topology, AggregatedTopology):
        return topology.replicas, topology.parallel
    if result.engine.orchestrator is None and gpus <= hardware.scale_up.domain:
        assumptions.append(f"no topology given: taken as one copy of the model, tp {gpus}")
        return 1, Parallel(tp=gpus)
    return "no topology: how many copies of the weights decode is unknown"


def output_tok_s(result: Result, gpus: int) -> float | None:
    """Output tokens per second of the deployment: as given, else per GPU × GPUs, else the
    output's share OSL / (ISL + OSL) of total tok/s."""
    m, w = result.metrics, result.workload
    if m.output_tok_s:
        return m.output_tok_s
    if m.output_tok_s_per_gpu:
        return m.output_tok_s_per_gpu * gpus
    if m.total_tok_s_per_gpu and w.isl and w.osl:
        return m.total_tok_s_per_gpu * gpus * w.osl / (w.isl + w.osl)
    return None


def _batch(
    result: Result, gpus: int
) -> tuple[float, Literal["output tok/s × TPOT", "concurrency"]] | None:
    """Requests decoding at once. Little's law first: each emits one token per TPOT, so
    output tok/s × TPOT of them run. Concurrency counts requests waiting or in prefill too,
    and a KV cache too small for all of them keeps some waiting."""
    output, tpot = output_tok_s(result, gpus), result.metrics.tpot_ms.p50
    if output and tpot:
        return output * tpot / 1000.0, "output tok/s × TPOT"
    if result.load.concurrency:
        return float(result.load.concurrency), "concurrency"
    return None


def _decode(
    result: Result,
    hardware: Hardware,
    arch: ModelArch,
    gpus: int,
    kv_dtype: str | None,
    fmt: str | None,
    assumptions: list[str],
) -> tuple[DecodeRoofline | None, str | None]:
    tpot = result.metrics.tpot_ms.p50
    if not tpot or fmt is None:
        return None, "no TPOT p50: no step time"
    isl, osl = result.workload.isl, result.workload.osl
    if isl is None or osl is None:
        return None, "no input and output lengths: the KV each step reads is unknown"
    batch = _batch(result, gpus)
    if batch is None:
        return None, "no concurrency, and no output tok/s to infer the batch from"
    layout = _decode_parallel(result, hardware, gpus, assumptions)
    if isinstance(layout, str):
        return None, layout
    replicas, parallel = layout
    lay = footprint.Layout.of(parallel)
    copies = replicas * lay.engines
    per_param = footprint.WEIGHT_FORMATS[fmt][0]
    dense, experts = footprint.split_params(arch)
    dense_reads = lay.group // lay.attn_tp
    tokens_per_copy = batch[0] / copies
    touched = experts * footprint.experts_touched(footprint.expert_miss(arch), tokens_per_copy)
    weight_bytes = copies * (dense * dense_reads + touched) * per_param
    ratio = result.workload.length_range_ratio
    context = mean_length(isl, ratio) + mean_length(osl, ratio) / 2.0
    kv_token, rank_gpu = footprint.kv_token_bytes(arch, kv_dtype, lay.attn_tp)
    kv_reads = rank_gpu * lay.attn_tp / kv_token
    kv_bytes = batch[0] * context * kv_token * kv_reads
    if kv_dtype is None:
        assumptions.append("KV cache taken as bf16 (the model's dtype): the result does not say")
    if result.speculative not in (None, "none"):
        assumptions.append(
            f"speculative decoding ({result.speculative}): a step emits more than one token, "
            "so it lasts longer than TPOT and the decode share is overstated"
        )
    total = weight_bytes + kv_bytes
    implied = total / (tpot / 1000.0)
    return (
        DecodeRoofline(
            fraction=implied / (gpus * hardware.hbm_tb_s * TERA),
            tpot_ms=tpot,
            batch=batch[0],
            batch_from=batch[1],
            copies=copies,
            tokens_per_copy=tokens_per_copy,
            dense_reads=dense_reads,
            weight_bytes_per_param=per_param,
            context_tokens=context,
            kv_bytes_per_token=kv_token,
            kv_reads=kv_reads,
            weight_bytes=weight_bytes,
            kv_bytes=kv_bytes,
            bytes_per_step=total,
            implied_tb_s=implied / TERA,
        ),
        None,
    )


def _prefill_tokens(
    result: Result, gpus: int
) -> tuple[float, Literal["total − output tok/s", "output tok/s × ISL / OSL"]] | None:
    """Prompt tokens per second of the deployment."""
    m, w = result.metrics, result.workload
    if m.total_tok_s_per_gpu and m.output_tok_s_per_gpu:
        return (m.total_tok_s_per_gpu - m.output_tok_s_per_gpu) * gpus, "total − output tok/s"
    output = output_tok_s(result, gpus)
    if output and w.isl and w.osl:
        return output * w.isl / w.osl, "output tok/s × ISL / OSL"
    return None


def _prefill(
    result: Result,
    hardware: Hardware,
    arch: ModelArch,
    gpus: int,
    fmt: str | None,
    assumptions: list[str],
) -> tuple[PrefillRoofline | None, str | None]:
    isl = result.workload.isl
    tokens = _prefill_tokens(result, gpus)
    if tokens is None or isl is None or fmt is None:
        return None, "no input length or throughput to count prefilled tokens from"
    peaks = hardware.tflops.model_dump()
    wanted = footprint.WEIGHT_FORMATS[fmt][1]
    peak_format = next((f for f in WIDER[wanted] if peaks.get(f)), None)
    if peak_format is None:
        return None, f"{hardware.id} gives no dense {wanted} TFLOPS"
    if peak_format != wanted:
        assumptions.append(f"{hardware.id} has no {wanted} tensor cores: {peak_format} peak used")
    computed = tokens[0]
    reuse = result.workload.prefix_reuse
    if reuse:
        computed *= 1.0 - reuse
        assumptions.append(f"prefix reuse {reuse:g}: that share of prompt tokens is not computed")
    gemm = 2.0 * (arch.active_params_b or arch.params_b) * GB
    mean_isl = mean_length(isl, result.workload.length_range_ratio)
    attention = footprint.attention_flops_per_pair(arch) * arch.head_dim * mean_isl / 2.0
    flops = gemm + attention
    peak = peaks[peak_format]
    return (
        PrefillRoofline(
            fraction=computed * flops / (gpus * peak * TERA),
            tokens_s=computed,
            tokens_from=tokens[1],
            gemm_flops_per_token=gemm,
            attention_flops_per_token=attention,
            flops_per_token=flops,
            peak_format=peak_format,
            peak_tflops=peak,
            implied_tflops=computed * flops / TERA,
        ),
        None,
    )


def result_roofline(repo: Repo, result: Result) -> Roofline:
    """The roofline of `result` with the repository's catalog: its hardware and model by id
    or alias, and the KV cache dtype of its recipe when the repository has that recipe."""
    recipe = repo.recipes.get(result.recipe.id) if result.recipe.id else None
    kv_dtype = recipe.settings.kv_cache.dtype if recipe else None
    return roofline(
        result,
        repo.resolve_hardware(result.hardware),
        repo.resolve_model(result.model),
        kv_dtype,
    )


def percent(fraction: float) -> str:
    """38%, 4.2%, 0.07%: two significant figures below 10%."""
    value = fraction * 100.0
    if value >= 10:
        return f"{value:.0f}%"
    return f"{value:.2g}%"


def summary(roof: Roofline) -> str:
    """One line: decode's share of HBM bandwidth and prefill's of compute, or why not."""
    if roof.decode is not None:
        decode = f"decode {percent(roof.decode.fraction)} of HBM bandwidth ({roof.hbm_tb_s:g} TB/s)"
    else:
        decode = f"decode … ({roof.decode_missing})"
    p = roof.prefill
    if p is not None:
        prefill = (
            f"prefill {percent(p.fraction)} of {p.peak_format} compute ({p.peak_tflops:g} TFLOPS)"
        )
    else:
        prefill = f"prefill … ({roof.prefill_missing})"
    if roof.decode is None and roof.prefill is None and roof.decode_missing == roof.prefill_missing:
        return f"… ({roof.decode_missing})"
    return f"{decode}, {prefill}"


def _count(n: float | None, one: str, many: str | None = None) -> str:
    """`1 GPU`, `8 GPUs`, `1.1 GPUs`."""
    return f"{n:g} {one if n == 1 else (many or one + 's')}"


def roofline_lines(roof: Roofline) -> list[str]:
    """The summary, then each share's sum with its figures, then the assumptions: enough to
    check the shares by hand (docs/benchmarks.md, Roofline)."""
    lines = [summary(roof)]
    d, p = roof.decode, roof.prefill
    if d is not None:
        lines.append(
            f"decode: {d.bytes_per_step / GB:.1f} GB a step = weights {d.weight_bytes / GB:.1f} "
            f"GB ({_count(d.copies, 'copy', 'copies')}, {d.tokens_per_copy:.1f} "
            f"tokens each) + KV {d.kv_bytes / GB:.1f} GB ({d.batch:.1f} requests × "
            f"{d.context_tokens:.0f} tokens × {d.kv_bytes_per_token / 1e3:.1f} kB, read by "
            f"{_count(d.kv_reads, 'GPU')}), every {d.tpot_ms:g} ms = "
            f"{d.implied_tb_s:.2f} TB/s of {_count(roof.gpus, 'GPU')} × {roof.hbm_tb_s:g} TB/s"
        )
    if p is not None:
        lines.append(
            f"prefill: {p.tokens_s:.0f} tok/s × {p.flops_per_token / GB:.1f} GFLOP a token "
            f"(2 × active params {p.gemm_flops_per_token / GB:.1f} + attention "
            f"{p.attention_flops_per_token / GB:.2f}) = {p.implied_tflops:.1f} TFLOPS of "
            f"{_count(roof.gpus, 'GPU')} × {p.peak_tflops:g} {p.peak_format} TFLOPS"
        )
    lines += [f"assumes: {a}" for a in roof.assumptions]
    return lines
