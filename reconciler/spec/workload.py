"""Models: workload profiles (catalog/workloads.yaml) — which results count as chat, agent, rag,
coding, reasoning or batch, and the lengths a traffic generator draws for each."""

from __future__ import annotations

from pydantic import Field, NonNegativeInt, PositiveInt, model_validator

from reconciler.spec.base import Citation, Slug, Spec


class TokenRange(Spec):
    """Inclusive bounds on a result's nominal token count (its isl or osl)."""

    min: PositiveInt
    max: PositiveInt

    @model_validator(mode="after")
    def _ordered(self) -> TokenRange:
        if self.min > self.max:
            raise ValueError(f"min ({self.min}) is above max ({self.max})")
        return self

    def contains(self, tokens: int) -> bool:
        return self.min <= tokens <= self.max


class LengthDistribution(Spec):
    """A normal distribution of token counts, clipped by the generator to the profile's range."""

    mean: PositiveInt
    stddev: NonNegativeInt


class Generator(Spec):
    """What a traffic generator draws for this profile."""

    input: LengthDistribution
    output: LengthDistribution


class WorkloadProfile(Spec):
    id: Slug  # chat, agent, rag, coding, batch, reasoning
    description: str
    input_tokens: TokenRange
    output_tokens: TokenRange
    prefix_reuse: float = Field(ge=0, le=1)  # typical fraction of input tokens shared
    generator: Generator
    throughput_only: bool = False  # true: a latency target is ignored for this profile
    source: Citation


class WorkloadsFile(Spec):
    workloads: list[WorkloadProfile] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_ids(self) -> WorkloadsFile:
        seen: set[str] = set()
        for profile in self.workloads:
            if profile.id in seen:
                raise ValueError(f"workload '{profile.id}' is defined twice")
            seen.add(profile.id)
        return self
