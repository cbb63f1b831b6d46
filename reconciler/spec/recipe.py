"""Models: a recipe (recipes/<model>/<name>@<rev>.yaml) — what one engine runs.

Settings are engine-neutral levers; each engine module maps them to its flags.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, PositiveInt, StrictBool, field_validator, model_validator

from reconciler.spec.base import Citation, RecipeId, Slug, Spec, registered
from reconciler.spec.engines import engine_names
from reconciler.spec.words import counted


def _engine_enum(schema: dict[str, Any]) -> None:
    schema["enum"] = list(engine_names())


class EngineRef(Spec):
    # One of the registered engines (spec/engines.py), read when a recipe is validated, so a
    # card registered later is accepted.
    name: str = Field(json_schema_extra=_engine_enum)
    version: str = Field(pattern=r"^[0-9]+\.[0-9]+(\.[0-9]+)?([.-]?(post|rc|dev)[0-9]*)?$")
    # The container image, when not the engine version's official one.
    image: str | None = Field(default=None, pattern=r"^[A-Za-z0-9][A-Za-z0-9._/:@-]*$")

    @field_validator("name", mode="before")
    @classmethod
    def _registered(cls, value: Any) -> Any:
        """A registered engine, refused as pydantic refuses a value outside a Literal."""
        return registered(value, engine_names())


class Parallel(Spec):
    """Parallelism inside one replica. GPUs = tp × pp × dp, or tp × pp with attention DP
    (SGLang's DP attention runs its DP ranks inside the TP group)."""

    tp: PositiveInt = 1
    pp: PositiveInt = 1
    dp: PositiveInt = 1
    ep: PositiveInt = 1
    dp_attention: bool = False

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * (1 if self.dp_attention else self.dp)

    @model_validator(mode="after")
    def _consistent(self) -> Parallel:
        if self.dp_attention and self.tp % self.dp:
            raise ValueError(f"with dp_attention, dp ({self.dp}) must divide tp ({self.tp})")
        if self.ep > self.gpus:
            raise ValueError(f"ep ({self.ep}) exceeds the replica's {counted(self.gpus, 'GPU')}")
        return self


PARALLEL_DEFAULT = "tp = the replica's GPUs ÷ (pp × dp) when tp is left out"


def default_parallel(data: Any) -> Any:
    """A pool's input with tp filled from its GPUs when tp is left out, as the engines do
    (one replica of N GPUs runs tensor parallel N): `{gpus: 4}` is tp 4, `{gpus: 8,
    parallel: {dp: 2}}` is tp 4 × dp 2. Given values are kept; a tp that does not divide
    evenly stays 1 and the GPU check refuses it."""
    if not isinstance(data, dict) or not isinstance(data.get("gpus"), int):
        return data
    parallel = data.get("parallel")
    parallel = {} if parallel is None else parallel
    if not isinstance(parallel, dict) or "tp" in parallel:
        return data
    pp, dp = parallel.get("pp", 1), parallel.get("dp", 1)
    if not (isinstance(pp, int) and isinstance(dp, int)) or pp < 1 or dp < 1:
        return data
    per_tp = pp * (1 if parallel.get("dp_attention") is True else dp)
    if data["gpus"] % per_tp or data["gpus"] == per_tp:
        return data  # refused below, or tp 1: the default as it stands
    return {**data, "parallel": {**parallel, "tp": data["gpus"] // per_tp}}


class Pool(Spec):
    """Identical replicas of one role."""

    replicas: PositiveInt = 1
    gpus: PositiveInt
    parallel: Parallel = Field(default_factory=Parallel, description=PARALLEL_DEFAULT)

    @model_validator(mode="before")
    @classmethod
    def _default_parallel(cls, data: Any) -> Any:
        return default_parallel(data)

    @model_validator(mode="after")
    def _gpus_match_parallel(self) -> Pool:
        if self.gpus != self.parallel.gpus:
            p = self.parallel
            raise ValueError(
                f"gpus is {self.gpus} but parallel gives {p.gpus} "
                f"(tp {p.tp} × pp {p.pp} × dp {1 if p.dp_attention else p.dp})"
            )
        return self


Role = Literal["aggregated", "prefill", "decode"]


class AggregatedTopology(Spec):
    mode: Literal["aggregated"]
    replicas: PositiveInt = 1
    gpus: PositiveInt
    parallel: Parallel = Field(default_factory=Parallel, description=PARALLEL_DEFAULT)

    @model_validator(mode="before")
    @classmethod
    def _default_parallel(cls, data: Any) -> Any:
        return default_parallel(data)

    @model_validator(mode="after")
    def _gpus_match_parallel(self) -> AggregatedTopology:
        Pool(replicas=self.replicas, gpus=self.gpus, parallel=self.parallel)
        return self

    def pools(self) -> list[tuple[Role, Pool]]:
        return [
            ("aggregated", Pool(replicas=self.replicas, gpus=self.gpus, parallel=self.parallel))
        ]


class DisaggregatedTopology(Spec):
    mode: Literal["disaggregated"]
    prefill: Pool
    decode: Pool

    def pools(self) -> list[tuple[Role, Pool]]:
        return [("prefill", self.prefill), ("decode", self.decode)]


Topology = Annotated[AggregatedTopology | DisaggregatedTopology, Field(discriminator="mode")]


def total_gpus(topology: AggregatedTopology | DisaggregatedTopology) -> int:
    """Every GPU of the deployment, prefill included."""
    return sum(pool.replicas * pool.gpus for _, pool in topology.pools())


KvDtype = Literal["auto", "bf16", "fp8", "fp8_e4m3", "fp8_e5m2"]
Quantization = Literal["none", "fp8", "fp4", "nvfp4", "mxfp4", "int4", "awq", "gptq", "w8a8_fp8"]


class KvCache(Spec):
    dtype: KvDtype = "auto"
    prefix_caching: bool = True
    memory_fraction: float = Field(default=0.90, gt=0, le=1)
    offload: Literal["none", "cpu"] = "none"
    offload_gb: float | None = Field(default=None, gt=0)


class Speculative(Spec):
    method: Literal["none", "mtp", "eagle", "eagle3", "ngram", "draft_model"] = "none"
    draft_tokens: PositiveInt | None = None
    draft_model: str | None = None

    @model_validator(mode="after")
    def _complete(self) -> Speculative:
        if self.method != "none" and self.draft_tokens is None:
            raise ValueError(f"speculative method {self.method} needs draft_tokens")
        if self.method in ("eagle", "eagle3", "draft_model") and not self.draft_model:
            raise ValueError(f"speculative method {self.method} needs draft_model")
        return self


class Settings(Spec):
    max_batch: PositiveInt | None = None
    max_batched_tokens: PositiveInt | None = None
    # true/false switch the engine's chunked prefill; a number is the chunk size in tokens.
    chunked_prefill: StrictBool | PositiveInt | None = None
    max_model_len: PositiveInt | None = None
    dtype: Literal["auto", "bfloat16", "float16"] = "auto"
    kv_cache: KvCache = KvCache()
    speculative: Speculative = Speculative()
    quantization: Quantization = "none"
    cuda_graphs: bool = True


class Recipe(Spec):
    id: RecipeId
    model: Slug
    engine: EngineRef
    hardware: list[Slug] = Field(min_length=1)
    topology: Topology
    settings: Settings = Settings()
    args: list[str] = []
    description: str | None = None
    source: Citation | None = None


class RecipeFile(Spec):
    recipe: Recipe


def describe_parallel(parallel: Parallel) -> str:
    parts = [
        f"{name} {value}"
        for name, value in (
            ("tp", parallel.tp),
            ("pp", parallel.pp),
            ("dp", parallel.dp),
            ("ep", parallel.ep),
        )
        if value > 1
    ]
    if parallel.dp_attention:
        parts.append("dp-attention")
    return ", ".join(parts) or "1 GPU"


def describe_topology(topology: AggregatedTopology | DisaggregatedTopology) -> str:
    """One line for people, e.g. 'prefill 2 × 4 GPUs (tp 4) + decode 1 × 8 GPUs (tp 8)'."""
    pools = [
        ("" if role == "aggregated" else f"{role} ")
        + f"{pool.replicas} × {counted(pool.gpus, 'GPU')} ({describe_parallel(pool.parallel)})"
        for role, pool in topology.pools()
    ]
    return " + ".join(pools)
