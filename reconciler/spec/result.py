"""Models: a benchmark result (results/…/<id>.json, or one line of results/published/*.jsonl)
and a traffic-shape line (the Mooncake trace format). Latencies are in milliseconds."""

from __future__ import annotations

import datetime as dt
from typing import Literal

from pydantic import Field, NonNegativeFloat, NonNegativeInt, PositiveInt, model_validator

from reconciler.spec.base import RecipeId, Slug, Spec
from reconciler.spec.recipe import Topology


class Percentiles(Spec):
    mean: NonNegativeFloat | None = None
    p50: NonNegativeFloat | None = None
    p90: NonNegativeFloat | None = None
    p95: NonNegativeFloat | None = None
    p99: NonNegativeFloat | None = None


class Metrics(Spec):
    ttft_ms: Percentiles = Percentiles()
    tpot_ms: Percentiles = Percentiles()
    itl_ms: Percentiles = Percentiles()
    e2e_ms: Percentiles = Percentiles()
    output_tok_s: NonNegativeFloat | None = None
    output_tok_s_per_gpu: NonNegativeFloat | None = None  # over every GPU, prefill included
    total_tok_s_per_gpu: NonNegativeFloat | None = None
    goodput_rps: NonNegativeFloat | None = None
    requests: NonNegativeInt | None = None
    errors: NonNegativeInt | None = None
    errors_by_kind: dict[str, NonNegativeInt] = {}  # e.g. http_503, timeout (bench/records.py)


class Workload(Spec):
    """What was sent: a named workload, fixed lengths, or a traffic file (by digest)."""

    name: str | None = None
    isl: PositiveInt | None = None  # nominal input tokens per request
    osl: PositiveInt | None = None  # nominal output tokens per request
    length_range_ratio: float | None = Field(default=None, gt=0, le=1)
    prefix_reuse: float | None = Field(default=None, ge=0, le=1)
    dataset: str | None = None
    traffic_digest: str | None = None


class Load(Spec):
    concurrency: PositiveInt | None = None
    rate: float | None = Field(default=None, gt=0)


class ResultEngine(Spec):
    name: str  # any engine, also ones denv cannot launch (trt-llm, atom, …)
    version: str | None = None
    image: str | None = None
    orchestrator: str | None = None  # e.g. dynamo, when one ran the engine


class ResultRecipe(Spec):
    id: RecipeId | None = None  # a file under recipes/, when denv has one
    digest: str | None = None


class UsedPrice(Spec):
    gpu_hour: float = Field(gt=0)
    source: str


class Source(Spec):
    kind: Literal["published", "measured", "simulated"]
    url: str | None = Field(default=None, pattern=r"^https?://")
    at: dt.date | None = None
    by: str | None = None
    citation: str | None = None
    notes: str | None = None

    @model_validator(mode="after")
    def _published_has_url(self) -> Source:
        if self.kind == "published" and not self.url:
            raise ValueError("a published result needs its url")
        return self


class Environment(Spec):
    driver: str | None = None
    runtime: str | None = None  # CUDA or ROCm version
    gpu_names: list[str] = []


class Result(Spec):
    id: Slug
    model: Slug
    weights: str | None = None
    precision: str | None = None
    speculative: str | None = None  # speculative decoding method (mtp, eagle3, …) or none
    recipe: ResultRecipe = ResultRecipe()
    engine: ResultEngine
    hardware: Slug
    gpus: PositiveInt | None = None  # every GPU of the deployment
    topology: Topology | None = None
    workload: Workload = Workload()
    load: Load = Load()
    # Factories: a default of a model with a list or dict is deep-copied for every result
    # that lacks it (a fifth of loading 2,000 results); a factory builds a fresh one.
    metrics: Metrics = Field(default_factory=Metrics)
    price: UsedPrice | None = None
    usd_per_m_output: NonNegativeFloat | None = None
    source: Source
    environment: Environment = Field(default_factory=Environment)


class TrafficLine(Spec):
    """One request of a traffic shape: lengths and timing, never text."""

    timestamp: NonNegativeFloat  # ms since the start
    input_length: PositiveInt
    output_length: PositiveInt
    hash_ids: list[NonNegativeInt] = []  # 512-token blocks; shared ids are shared prefixes
