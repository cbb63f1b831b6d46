"""Pure logic: the simulator's performance model — how long one forward step of a batch takes
on one replica, and how many tokens of KV cache it holds, from a SimSpec (hardware, model
architecture, recipe settings, role, GPUs). No I/O, no clock.

A step is a roofline per part: GEMMs take max(FLOPs / compute, weight bytes / bandwidth),
attention max(FLOPs / compute, KV bytes / bandwidth); tensor-parallel all-reduces, a per-layer
floor and the launch cost are added. docs/simulator.md gives every formula and its source.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from reconciler.catalog.footprint import (
    WEIGHT_FORMATS,
    Layout,
    attention_flops_per_pair,
    expert_miss,
    experts_touched,
    kv_token_bytes,
    split_params,
)
from reconciler.engines.cards import card
from reconciler.engines.model.calibration import PD_HANDOFF_S, Tuning, efficiency
from reconciler.engines.model.levers import ACCEPTANCE, DRAFT_MODEL_SHARE, Limits, tokens_per_step
from reconciler.engines.model.spec import SimSpec
from reconciler.errors import DenvError
from reconciler.spec.catalog import Hardware, ModelArch
from reconciler.spec.recipe import DisaggregatedTopology, Parallel, Recipe, Settings

GB = 1e9
TERA = 1e12
ACTIVATION_BYTES = 2  # bf16 activations cross the all-reduces
EAGER_LAUNCH_PER_LAYER_S = 40e-6  # ~10 kernel launches per layer at ~4 µs each, CPU side
GRAPH_LAUNCH_S = 30e-6  # replaying one captured CUDA graph
NIC_GB_S = 50.0  # one 400 Gb/s RDMA NIC per GPU (HGX reference design), one direction
INTER_NODE_COLLECTIVE_S = 40e-6  # a small all-reduce across nodes over RDMA (NCCL LL/tree)


class WeightsDoNotFit(DenvError):
    """The weights alone fill the memory the recipe gives the engine."""


@dataclass(frozen=True)
class Batch:
    """What one step computes, summed over its requests."""

    decode: int = 0  # requests emitting a token this step
    decode_ctx: int = 0  # KV tokens those requests attend to
    prefill: int = 0  # prompt tokens computed this step
    prefill_pairs: float = 0.0  # Σ chunk × (tokens before it + chunk / 2): attention work
    prefill_prefix: int = 0  # Σ tokens before each chunk: KV read by prefill attention


@dataclass(frozen=True, slots=True)
class PerfModel:
    """Step times and capacity of one replica (one simulator process) of a recipe role."""

    role: str
    gpus: int
    limits: Limits
    prefix_caching: bool
    kv_capacity_tokens: int  # KV tokens the replica holds, all its engines together
    kv_bytes_per_token: float  # KV of one token over the whole model
    weight_bytes_per_gpu: float
    max_request_tokens: int  # prompt + output of one request: context limit and KV capacity
    draft_tokens: int  # speculative drafts per step; 0 without speculative decoding
    tokens_per_step: float  # expected tokens a decoding request emits per step
    request_overhead_s: float  # before a request reaches the batch (HTTP, tokeniser)
    kv_transfer_gb_s: float  # P/D hand-off bandwidth; 0 for an aggregated recipe
    pd_handoff_s: float  # fixed time of one P/D hand-off
    # step-time coefficients (per engine of the replica, per GPU)
    _engines: int
    _pp: int
    _layers: int
    _dense_bytes: float  # non-expert weight bytes per GPU
    _expert_bytes: float  # routed-expert weight bytes per GPU, all experts
    _expert_miss: float  # 1 - experts per token / experts: the chance a token skips an expert
    _gemm_flops_per_token: float  # per GPU
    _gemm_flops_s: float
    _attn_flops_s: float
    _attn_decode_flops: float  # per GPU per (query token, context token) pair
    _attn_prefill_flops: float
    _kv_read_bytes: float  # per GPU per context token attended, averaged over DP ranks
    _bw: float  # HBM bytes/s weight reads reach
    _kv_bw: float  # HBM bytes/s KV reads reach
    _link_bytes_s: float
    _comm_bytes_per_token: float  # ring all-reduce traffic per GPU per token per collective
    _hop_bytes_per_token: float  # activations handed to the next pipeline stage
    _collectives: int  # per step
    _collective_s: float
    _floor_s: float  # per-layer floor × layers
    _cuda_graphs: bool
    _draft_share: float  # a draft pass as a share of a decode step

    @classmethod
    def from_spec(
        cls,
        spec: SimSpec,
        tuning: Tuning | None = None,
    ) -> PerfModel:
        """The model of one replica. `tuning` replaces calibrated constants (calibration.py);
        the calibration script passes its candidates here."""
        tuning = tuning or Tuning()
        recipe, hw, arch = spec.recipe, spec.hardware, spec.model
        settings = recipe.settings
        eff = tuning.efficiency or efficiency(
            hw.id, hw.vendor, recipe.engine.name, recipe.engine.version
        )
        lay = Layout.of(role_parallel(recipe, spec.role))
        w = _Weights.of(arch, settings, lay)
        rank_tokens, kv_token, kv_token_gpu = _kv_room(arch, hw, settings, lay, w.per_gpu)
        peak = hw.tflops.model_dump()
        gemm_tflops = peak.get(w.gemm_format) or peak.get("fp8") or peak["bf16"]
        decode_dim = (
            arch.kv_lora_rank + (arch.qk_rope_head_dim or 0) if arch.kv_lora_rank else arch.head_dim
        )
        attn_pair = attention_flops_per_pair(arch) / lay.group
        method = settings.speculative.method
        acceptance = ACCEPTANCE.get(method, 0.0)
        if method == "mtp" and tuning.mtp_acceptance is not None:
            acceptance = tuning.mtp_acceptance
        active = arch.active_params_b or arch.params_b
        group = lay.group
        # a replica wider than one NVLink domain all-reduces over the RDMA network
        across_nodes = spec.gpus > hw.scale_up.domain
        link_gb_s = NIC_GB_S if across_nodes else hw.scale_up.gb_s
        collective_s = eff.collective_s
        if across_nodes:
            collective_s = max(collective_s, INTER_NODE_COLLECTIVE_S)
        return cls(
            role=spec.role,
            gpus=spec.gpus,
            limits=card(recipe.engine.name).sim_limits(settings, hw, recipe.args),
            prefix_caching=settings.kv_cache.prefix_caching and spec.role != "decode",
            kv_capacity_tokens=rank_tokens * lay.attn_ranks * lay.engines,
            kv_bytes_per_token=kv_token,
            weight_bytes_per_gpu=w.per_gpu,
            max_request_tokens=min(settings.max_model_len or arch.max_context, rank_tokens),
            draft_tokens=w.drafts,
            tokens_per_step=tokens_per_step(acceptance, w.drafts),
            request_overhead_s=eff.request_overhead_s,
            kv_transfer_gb_s=kv_transfer_gb_s(recipe, hw),
            pd_handoff_s=PD_HANDOFF_S if tuning.pd_handoff_s is None else tuning.pd_handoff_s,
            _engines=lay.engines,
            _pp=lay.pp,
            _layers=arch.layers,
            _dense_bytes=w.dense,
            _expert_bytes=w.experts,
            _expert_miss=expert_miss(arch),
            _gemm_flops_per_token=2.0 * active * GB / group,
            _gemm_flops_s=gemm_tflops * TERA * eff.mfu,
            _attn_flops_s=hw.tflops.bf16 * TERA * eff.mfu if hw.tflops.bf16 else 1e15,
            _attn_decode_flops=attn_pair * decode_dim,
            _attn_prefill_flops=attn_pair * arch.head_dim,
            _kv_read_bytes=kv_token_gpu / lay.attn_ranks,
            _bw=hw.hbm_tb_s * TERA * eff.hbm,
            _kv_bw=hw.hbm_tb_s * TERA * eff.kv_hbm,
            _link_bytes_s=link_gb_s * GB,
            _comm_bytes_per_token=2.0 * (group - 1) / group * arch.hidden_size * ACTIVATION_BYTES,
            _hop_bytes_per_token=arch.hidden_size * ACTIVATION_BYTES,
            _collectives=2 * arch.layers if group > 1 else 0,
            _collective_s=collective_s,
            _floor_s=eff.layer_floor_s * arch.layers,
            _cuda_graphs=settings.cuda_graphs,
            _draft_share=w.draft_share,
        )

    def pooled(self, replicas: int) -> PerfModel:
        """`replicas` copies behind a router, as one scheduler: R times the batch cap and KV,
        each step as long as one replica's step over 1/R of the batch (perfect balance)."""
        if replicas == 1:
            return self
        return replace(
            self,
            kv_capacity_tokens=self.kv_capacity_tokens * replicas,
            gpus=self.gpus * replicas,
            _engines=self._engines * replicas,
        )

    @property
    def max_running(self) -> int:
        """Requests the replica runs at once: the batch cap of each of its engines."""
        return self.limits.max_batch * self._engines

    @property
    def step_token_budget(self) -> int:
        return self.limits.token_budget * self._engines

    # ------------------------------------------------------------------ step time
    def step_time(self, batch: Batch) -> float:
        """Seconds one forward step of `batch` takes, drafts and verification included."""
        if batch.decode == 0 and batch.prefill == 0:
            return 0.0
        verify = 1 + self.draft_tokens
        prefill_tokens = batch.prefill * (1.0 + self._draft_share)
        t = self._forward(
            batch.decode * verify + prefill_tokens,
            batch.decode_ctx,
            batch.decode_ctx * verify,
            batch.prefill_pairs,
            batch.prefill_prefix,
        )
        graphed = (
            self._cuda_graphs
            and batch.prefill == 0
            and batch.decode <= self.limits.cuda_graph_max_batch
        )
        t += GRAPH_LAUNCH_S if graphed else EAGER_LAUNCH_PER_LAYER_S * self._layers
        if self.draft_tokens and batch.decode:
            draft = self._forward(batch.decode, batch.decode_ctx, batch.decode_ctx, 0.0, 0)
            t += self.draft_tokens * self._draft_share * draft
        return t

    def _forward(
        self, tokens: float, kv_tokens: int, decode_pairs: float, pairs: float, prefix: int
    ) -> float:
        """GPU time of one pass of `tokens` through the model, per engine of the replica."""
        e = self._engines
        tokens /= e
        touched = self._expert_bytes * experts_touched(self._expert_miss, tokens)
        weights = self._dense_bytes + touched
        gemm = max(tokens * self._gemm_flops_per_token / self._gemm_flops_s, weights / self._bw)
        attn_flops = (decode_pairs * self._attn_decode_flops + pairs * self._attn_prefill_flops) / e
        kv_bytes = (kv_tokens + prefix) * self._kv_read_bytes / e
        attn = max(attn_flops / self._attn_flops_s, kv_bytes / self._kv_bw)
        comm = 0.0
        if self._collectives:
            per = self._collective_s + tokens * self._comm_bytes_per_token / self._link_bytes_s
            comm = self._collectives * per
        if self._pp > 1:
            hop = tokens * self._hop_bytes_per_token / self._link_bytes_s
            comm += (self._pp - 1) * (self._collective_s + hop)
        return gemm + attn + comm + self._floor_s

    # ------------------------------------------------------------------ conveniences
    def decode_step_time(self, batch: int, context: int) -> float:
        """One decode step of `batch` requests that each attend to `context` tokens."""
        return self.step_time(Batch(decode=batch, decode_ctx=batch * context))

    def prefill_time(self, tokens: int) -> float:
        """A prompt of `tokens` alone, in the chunks the engine cuts it into."""
        chunk = self.limits.chunk_tokens or tokens
        total, done = 0.0, 0
        while done < tokens:
            size = min(chunk, tokens - done)
            total += self.step_time(
                Batch(prefill=size, prefill_pairs=size * (done + size / 2), prefill_prefix=done)
            )
            done += size
        return total

    def kv_transfer_s(self, tokens: int) -> float:
        """Moving one prompt's KV from a prefill replica to a decode replica."""
        if self.kv_transfer_gb_s <= 0:
            return 0.0
        return self.pd_handoff_s + tokens * self.kv_bytes_per_token / (self.kv_transfer_gb_s * GB)


def role_parallel(recipe: Recipe, role: str) -> Parallel:
    topology = recipe.topology
    if isinstance(topology, DisaggregatedTopology):
        return topology.decode.parallel if role == "decode" else topology.prefill.parallel
    return topology.parallel


@dataclass(frozen=True)
class _Weights:
    dense: float  # non-expert bytes per GPU (one pipeline stage's share: see per_gpu)
    experts: float  # routed-expert bytes per GPU
    per_gpu: float  # all weights one GPU holds, draft head included
    gemm_format: str
    drafts: int
    draft_share: float  # a draft pass as a share of a decode step

    @classmethod
    def of(cls, arch: ModelArch, settings: Settings, lay: Layout) -> _Weights:
        per_param, gemm_format = WEIGHT_FORMATS[settings.quantization]
        dense_params, expert_params = split_params(arch)
        dense = dense_params * per_param / lay.attn_tp
        experts = expert_params * per_param / lay.group
        method = settings.speculative.method
        drafts = (settings.speculative.draft_tokens or 0) if method != "none" else 0
        if method in ("mtp", "eagle", "eagle3"):  # one transformer layer
            share = 1.0 / arch.layers
        elif method == "draft_model":
            share = DRAFT_MODEL_SHARE
        else:  # none, or n-gram lookup on the CPU
            share = 0.0
        draft_bytes = (dense_params + expert_params) * share * per_param / lay.group
        per_gpu = (dense + experts + draft_bytes) / lay.pp
        return cls(dense, experts, per_gpu, gemm_format, drafts, share)


def _kv_room(
    arch: ModelArch, hw: Hardware, settings: Settings, lay: Layout, weights: float
) -> tuple[int, float, float]:
    """(KV tokens one attention rank holds, KV bytes per token, KV bytes per token per GPU)."""
    fraction = settings.kv_cache.memory_fraction
    budget = hw.memory_gb * GB * fraction - weights
    if budget <= 0:
        raise WeightsDoNotFit(
            f"{arch.id} needs {weights / GB:.1f} GB of weights per GPU with "
            f"{settings.quantization} weights, tp {lay.tp} and pp {lay.pp}; {hw.id} gives "
            f"{hw.memory_gb * fraction:.1f} GB (memory_fraction {fraction})"
        )
    kv_token, rank_gpu = kv_token_bytes(arch, settings.kv_cache.dtype, lay.attn_tp)
    per_gpu = rank_gpu / lay.pp
    return int(budget / per_gpu), kv_token, per_gpu


def kv_transfer_gb_s(recipe: Recipe, hw: Hardware) -> float:
    """P/D hand-off bandwidth between one prefill and one decode replica: the scale-up link
    when both fit one NVLink domain, else one RDMA NIC per GPU; the narrower side limits."""
    topology = recipe.topology
    if not isinstance(topology, DisaggregatedTopology):
        return 0.0
    lanes = min(topology.prefill.gpus, topology.decode.gpus)
    if topology.prefill.gpus + topology.decode.gpus <= hw.scale_up.domain:
        return hw.scale_up.gb_s * lanes
    return NIC_GB_S * lanes
