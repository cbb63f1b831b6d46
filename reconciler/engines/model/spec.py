"""Models: what one simulator process serves — everything `denv sim serve` needs, passed as
one JSON argument so a simulated unit is self-contained (no repository on the host)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, PositiveInt

from reconciler.spec.base import Spec
from reconciler.spec.catalog import Hardware, ModelArch
from reconciler.spec.recipe import Recipe


class SimSpec(Spec):
    served_model: str  # the name in /v1/models and in responses
    weights: str  # decides the greedy answers: two simulators of one weights id agree
    model: ModelArch  # architecture: parameter bytes, KV bytes per token, FLOPs
    hardware: Hardware  # memory, HBM bandwidth, TFLOPS, scale-up link
    recipe: Recipe  # engine name and version, topology, settings
    role: Literal["aggregated", "prefill", "decode"] = "aggregated"
    gpus: PositiveInt  # GPUs of this replica (this process stands for all of them)
    time_scale: float = Field(default=1.0, gt=0)  # >1 runs faster than real time, and says so
    seed: int = 0
    warmup_s: float = Field(default=0.5, ge=0)  # /health answers 503 until it has passed
