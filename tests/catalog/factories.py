"""Test helpers: small Result, Offer and WorkloadProfile builders with sensible defaults."""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal

from reconciler.spec.catalog import Offer
from reconciler.spec.result import Result
from reconciler.spec.workload import WorkloadProfile

Kind = Literal["published", "measured", "simulated"]


def result(
    id: str = "r1",
    *,
    model: str = "deepseek-r1",
    hardware: str = "h200",
    engine: str = "sglang",
    version: str | None = "0.5.9",
    precision: str | None = "fp8",
    gpus: int | None = 8,
    topology: dict[str, Any] | None = None,
    isl: int | None = 1024,
    osl: int | None = 1024,
    concurrency: int | None = 64,
    ttft_p99_ms: float | None = 800.0,
    tpot_p50_ms: float | None = 20.0,
    itl_p95_ms: float | None = None,
    output_tok_s: float | None = 8000.0,
    output_tok_s_per_gpu: float | None = None,
    at: dt.date | None = dt.date(2026, 1, 1),
    kind: Kind = "published",
    price: tuple[float, str] | None = None,
    usd_per_m_output: float | None = None,
    recipe: str | None = None,
    workload: str | None = None,
) -> Result:
    return Result.model_validate(
        {
            "id": id,
            "model": model,
            "hardware": hardware,
            "engine": {"name": engine, "version": version},
            "precision": precision,
            "gpus": gpus,
            "topology": topology,
            "recipe": {"id": recipe},
            "workload": {"name": workload, "isl": isl, "osl": osl},
            "load": {"concurrency": concurrency},
            "metrics": {
                "ttft_ms": {"p99": ttft_p99_ms},
                "tpot_ms": {"p50": tpot_p50_ms},
                "itl_ms": {"p95": itl_p95_ms},
                "output_tok_s": output_tok_s,
                "output_tok_s_per_gpu": output_tok_s_per_gpu,
            },
            "price": None if price is None else {"gpu_hour": price[0], "source": price[1]},
            "usd_per_m_output": usd_per_m_output,
            "source": {
                "kind": kind,
                "url": None if kind == "simulated" else f"https://example.org/{id}",
                "at": at,
            },
        }
    )


def offer(
    hardware: str = "h200",
    gpu_hour: float = 2.0,
    *,
    provider: str = "semianalysis",
    tier: str | None = "hyperscaler",
    as_of: dt.date = dt.date(2026, 7, 31),
    url: str = "https://example.org/prices",
) -> Offer:
    return Offer(
        hardware=hardware,
        provider=provider,
        tier=tier,
        gpu_hour=gpu_hour,
        as_of=as_of,
        source={"url": url},
    )


def profile(
    id: str,
    input_tokens: tuple[int, int],
    output_tokens: tuple[int, int],
    *,
    throughput_only: bool = False,
) -> WorkloadProfile:
    return WorkloadProfile.model_validate(
        {
            "id": id,
            "description": f"{id} traffic",
            "input_tokens": {"min": input_tokens[0], "max": input_tokens[1]},
            "output_tokens": {"min": output_tokens[0], "max": output_tokens[1]},
            "prefix_reuse": 0.2,
            "generator": {
                "input": {"mean": input_tokens[0], "stddev": 0},
                "output": {"mean": output_tokens[0], "stddev": 0},
            },
            "throughput_only": throughput_only,
            "source": {"url": "https://example.org/workloads"},
        }
    )


# The ranges of catalog/workloads.yaml, written out so that tests do not read data files.
PROFILES = (
    profile("chat", (1, 2048), (1, 2048)),
    profile("agent", (2049, 131072), (1, 2048)),
    profile("rag", (2049, 131072), (1, 2048)),
    profile("coding", (2049, 131072), (1, 2048)),
    profile("reasoning", (1, 8192), (2049, 131072)),
    profile("batch", (1, 1048576), (1, 1048576), throughput_only=True),
)
