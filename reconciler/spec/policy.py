"""Models: policies (policies/alarms.yaml, gates.yaml, optimizer.yaml, pr.yaml)."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, PositiveInt, field_validator, model_validator

from reconciler.spec.alarm_metrics import alarm_metric, alarm_metric_names
from reconciler.spec.base import Duration, Slug, Spec, parse_duration
from reconciler.spec.scaling import DEFAULT_POLICY, ScalingPolicy


def _metric_enum(schema: dict[str, Any]) -> None:
    schema["enum"] = list(alarm_metric_names())


def _parse_fraction(value: Any) -> float:
    if isinstance(value, str) and value.strip().endswith("%"):
        return float(value.strip()[:-1]) / 100
    return float(value)


class Alarm(Spec):
    """A threshold on an engine metric over a window, e.g. TTFT p99 ≤ 1.5 s over 5 m.
    `max` is in the metric's unit (spec/alarm_metrics.py): seconds for latencies (units
    accepted), a fraction for rates and usage ('1%' accepted), else a number."""

    # One of the alarm metrics (spec/alarm_metrics.py), read when an alarm is validated.
    metric: str = Field(json_schema_extra=_metric_enum)
    stat: Literal["p50", "p90", "p95", "p99", "mean", "value"] = "value"
    max: float
    window: Duration = 300.0
    min_requests: PositiveInt = 50

    @field_validator("metric", mode="before")
    @classmethod
    def _known(cls, value: Any) -> Any:
        if isinstance(value, str):
            alarm_metric(value)
        return value

    @model_validator(mode="before")
    @classmethod
    def _units(cls, data: Any) -> Any:
        if isinstance(data, dict) and "max" in data:
            if data.get("metric") not in alarm_metric_names():  # its unit is unknown: the
                return {**data, "max": 0.0}  # metric's own error is the one to report
            unit, limit = alarm_metric(data["metric"]).unit, data["max"]
            if unit == "seconds":
                data = {**data, "max": parse_duration(limit)}
            elif unit == "fraction":
                data = {**data, "max": _parse_fraction(limit)}
        return data

    @model_validator(mode="after")
    def _stat_fits_metric(self) -> Alarm:
        if alarm_metric(self.metric).read == "histogram" and self.stat == "value":
            raise ValueError(f"a latency alarm needs a stat (p50 … p99 or mean), not {self.stat}")
        return self


class PrometheusSource(Spec):
    """A Prometheus server that scrapes the engines (with their default `instance` label,
    host:port): alarms query it instead of scraping each engine's /metrics."""

    url: str = Field(pattern=r"^https?://")


# What every stage watches besides its own alarms (docs/stages.md, "Default alarms"): failed
# requests are never invisible, whatever a stage names. `defaults:` in policies/alarms.yaml
# replaces them (`defaults: {}`: none).
# More than one request in fifty failed over 5 minutes, judged from 50 requests on.
DEFAULT_ALARMS: dict[str, Alarm] = {
    "error-rate": Alarm(metric="error_rate", max=0.02, window=300.0, min_requests=50)
}


class AlarmsFile(Spec):
    alarms: dict[Slug, Alarm] = {}
    defaults: dict[Slug, Alarm] | None = None  # None: DEFAULT_ALARMS
    prometheus: PrometheusSource | None = None


class ParityPolicy(Spec):
    """How answers of a candidate are compared with the reference's (docs/parity.md):
    strict needs every greedy token equal; tolerant also passes an answer whose first
    differing token is, on each side, among the other side's top_k logprobs."""

    mode: Literal["strict", "tolerant"] = "tolerant"
    top_k: int = Field(default=5, ge=1, le=20)  # OpenAI-compatible servers give at most 20
    suite: Slug = "default"  # policies/parity/<suite>.jsonl


class Gates(Spec):
    require_pinned_weights: bool = True
    default_approvals: int = Field(default=1, ge=0)
    approvers: list[str] = []  # GitHub users or org/team; empty: anyone with write permission
    min_ready_fraction: float = Field(default=1.0, gt=0, le=1)
    # A roll without free GPUs for a surge replica takes one replica out at a time; 0 forbids it.
    max_unavailable: int = Field(default=1, ge=0, le=1)
    rollback_on_alarm: Literal["bake", "always"] = "bake"
    parity: ParityPolicy = ParityPolicy()


class GatesFile(Spec):
    gates: Gates


class OptimizerRules(Spec):
    max_trials: PositiveInt = 40
    allow_quantization: list[str] = []  # formats the optimizer may try; none by default
    allow_engine_change: bool = True
    parity: Literal["strict", "tolerant"] = "tolerant"
    parity_top_k: PositiveInt = 5
    repeats: PositiveInt = 3
    min_gain: float = Field(default=0.03, ge=0)
    drift_threshold: float = Field(default=0.2, ge=0)


class OptimizerFile(Spec):
    optimizer: OptimizerRules


# Image patterns: a repository (`lmsysorg/sglang`, `registry.example.com/ml/vllm`), a namespace
# and everything under it (`lmsysorg/*`), or one pinned image (`…:v0.5.12`, `…@sha256:<hex>`).
_IMAGE_PATTERN = re.compile(
    r"^[a-z0-9][a-z0-9._-]*(:[0-9]+)?(/[a-z0-9][a-z0-9._-]*)*(/\*|:[A-Za-z0-9_][A-Za-z0-9._-]*"
    r"|@sha256:[0-9a-f]{64})?$"
)


def _image_pattern(value: str) -> str:
    if not _IMAGE_PATTERN.match(value):
        raise ValueError(
            f"'{value}' is not an image pattern: a repository (lmsysorg/sglang), a namespace "
            "(lmsysorg/*) or a pinned image (lmsysorg/sglang:v0.5.12, …@sha256:<digest>), "
            "in lower case"
        )
    return value


ImagePattern = Annotated[str, AfterValidator(_image_pattern)]
# The publishers of the engines' official images (vllm/vllm-openai, lmsysorg/sglang and its
# ROCm builds) and AMD's ROCm organisation, which publishes vLLM and SGLang builds for AMD GPUs.
DEFAULT_PR_IMAGES = ("vllm/*", "lmsysorg/*", "rocm/*")


class PrWeights(Spec):
    """Where the weights a pull request names may come from (rule `weights`)."""

    # pinned: hf://org/repo@<the full 40-hex commit>; off: no Hugging Face weights
    hf: Literal["pinned", "off"] = "pinned"
    # Hugging Face organisations (or users) weights may come from; empty: any
    hf_orgs: list[Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")]] = []
    # file:// and s3:// under the weights.roots of the (trusted) fleet they are fetched on
    fleet_roots: bool = True


class PrPolicy(Spec):
    """What a pull request may propose for the bot to run (policies/pr.yaml, read from the
    trusted ref): each list is one rule, named in every refusal (docs/github.md)."""

    images: list[ImagePattern] = list(DEFAULT_PR_IMAGES)
    weights: PrWeights = PrWeights()
    # Refused on top of every flag that takes a host path (derived from the flag's name)
    refused_flags: list[Annotated[str, Field(pattern=r"^--?[A-Za-z0-9][A-Za-z0-9_-]*$")]] = [
        "--trust-remote-code"
    ]
    # Environment variables of the bot a pull request's trial may receive (a fleet's
    # weights.token_env); none by default: trial weights are public or pre-staged
    secrets: list[Annotated[str, Field(pattern=r"^[A-Z_][A-Z0-9_]*$")]] = []
    # Branches besides the default one whose pull requests may start trials on hosts (each
    # named in full); a pull request into any other base is planned, never benched
    allowed_bases: list[Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._/-]*$")]] = []
    # Fleets whose trial engines would run as the agent's user (Slurm, `trial_user: null`)
    # where the operator still lets a pull request's trial run; none by default
    agent_user_fleets: list[Slug] = []


class PrPolicyFile(Spec):
    pr: PrPolicy


class Policies(Spec):
    alarms: dict[str, Alarm] = {}
    default_alarms: dict[str, Alarm] = DEFAULT_ALARMS
    prometheus: PrometheusSource | None = None  # None: alarms scrape the engines themselves
    gates: Gates = Gates()
    optimizer: OptimizerRules = OptimizerRules()
    pr: PrPolicy = PrPolicy()
    # policies/scaling.yaml: how elastic stages choose their count; `default` always exists
    scaling: dict[str, ScalingPolicy] = {DEFAULT_POLICY: ScalingPolicy()}


def watched_alarms(policies: Policies) -> dict[str, Alarm]:
    """Every alarm a stage may watch: the file's, and the defaults not named like one."""
    return {**policies.default_alarms, **policies.alarms}


def stage_alarms(policies: Policies, names: list[str]) -> dict[str, Alarm]:
    """The alarms a stage watches: those it names, then each default on a metric none of
    them reads (a stage that names its own error-rate alarm keeps its threshold)."""
    own = {n: policies.alarms[n] for n in names if n in policies.alarms}
    metrics = {a.metric for a in own.values()}
    for name, alarm in policies.default_alarms.items():
        if alarm.metric not in metrics and name not in policies.alarms:
            own[name] = alarm
    return own
