"""Models: catalog files — hardware specs, GPU offers and model architectures, with sources."""

from __future__ import annotations

import datetime as dt
from typing import Literal

from pydantic import Field, PositiveFloat, PositiveInt

from reconciler.spec.base import Citation, Slug, Spec


class Tflops(Spec):
    """Dense (no sparsity) tensor TFLOPS; null where the GPU has no such format."""

    bf16: PositiveFloat | None = None
    fp8: PositiveFloat | None = None
    fp4: PositiveFloat | None = None


class ScaleUp(Spec):
    tech: str
    gb_s: PositiveFloat  # per GPU, one direction
    domain: PositiveInt  # GPUs in one NVLink / xGMI domain


class Hardware(Spec):
    id: Slug
    name: str
    vendor: Literal["nvidia", "amd", "intel", "cpu"]  # cpu: a core, for vLLM's CPU build
    aliases: list[Slug] = []  # other keys sources use, e.g. gb200 for gb200-nvl72
    memory_gb: PositiveFloat  # usable HBM per GPU
    memory_type: str | None = None
    hbm_tb_s: PositiveFloat
    tflops: Tflops
    scale_up: ScaleUp
    source: Citation


class HardwareFile(Spec):
    hardware: list[Hardware]


class Offer(Spec):
    """A price per GPU-hour. `list_price`: what a provider publishes for renting it;
    `modelled_tco`: a cost model's estimate of owning or renting it (SemiAnalysis's AI Cloud
    TCO tiers), not a quote anyone offers."""

    hardware: Slug
    kind: Literal["list_price", "modelled_tco"] = "list_price"
    provider: str
    tier: str | None = None
    region: str = "global"
    gpu_hour: PositiveFloat
    as_of: dt.date
    source: Citation
    note: str | None = None


class OffersFile(Spec):
    offers: list[Offer]


class WeightsPin(Spec):
    """The model's weights at one commit of `hf_repo`, and where that commit is cited."""

    commit: str = Field(pattern=r"^[0-9a-f]{40}$")
    source: Citation


class ModelArch(Spec):
    id: Slug
    name: str
    aliases: list[str] = []  # names sources use, e.g. DeepSeek-R1-0528
    hf_repo: str | None = None
    weights: WeightsPin | None = None  # what `denv deploy` pins a new release to
    params_b: PositiveFloat
    active_params_b: PositiveFloat | None = None  # MoE only
    layers: PositiveInt
    hidden_size: PositiveInt
    attention_heads: PositiveInt
    kv_heads: PositiveInt
    head_dim: PositiveInt
    kv_lora_rank: PositiveInt | None = None  # MLA: the compressed KV width per layer
    qk_rope_head_dim: PositiveInt | None = None  # MLA: the rotary part cached beside it
    experts: PositiveInt | None = None
    experts_per_token: PositiveInt | None = None
    vocab_size: PositiveInt
    max_context: PositiveInt
    source: Citation = Field(description="the model's public config")


class ModelsFile(Spec):
    models: list[ModelArch]
