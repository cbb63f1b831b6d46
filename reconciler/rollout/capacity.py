"""Pure logic: what one replica of a recipe serves — the highest arrival rate (requests/s) at
which the simulator predicts it holds the stage's latency targets, for the lengths the
traffic has. An elastic stage's predictive signal: the arrival rate over it is the count."""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Mapping

from reconciler.engines.model import traffic
from reconciler.engines.model.predict import PredictionError, predict
from reconciler.engines.model.stats import Prediction
from reconciler.errors import DenvError
from reconciler.spec.catalog import Hardware, ModelArch
from reconciler.spec.policy import Alarm
from reconciler.spec.recipe import Recipe
from reconciler.spec.scaling import ScalingPolicy, with_replicas

LATENCIES = ("ttft", "itl", "tpot")
LENGTH_STEP = 64  # lengths rounded to this many tokens: a cache entry per shape
SECONDS = 60.0  # each probe simulates about a minute of arrivals
LOWEST, HIGHEST = 0.01, 10_000.0  # requests/s searched
BISECTIONS = 8

Targets = tuple[tuple[str, str, float], ...]  # (metric, stat, seconds)


def targets(policy: ScalingPolicy, alarms: Mapping[str, Alarm]) -> Targets:
    """The stage's latency alarms (TTFT, ITL, TPOT), else the policy's TTFT and ITL at p99."""
    found = tuple(
        sorted((a.metric, a.stat, a.max) for a in alarms.values() if a.metric in LATENCIES)
    )
    return found or (("ttft", "p99", policy.ttft), ("itl", "p99", policy.itl))


def replica_capacity(
    recipe: Recipe,
    hardware: Hardware,
    model: ModelArch,
    input_length: int,
    output_length: int,
    wanted: Targets,
) -> float | None:
    """Requests/s one replica serves within every target; None when even the lowest rate
    misses (or the shape does not fit a replica)."""
    one = recipe.model_copy(update={"topology": with_replicas(recipe.topology, 1)})
    shape = (_rounded(input_length), _rounded(output_length))
    return _capacity(
        one.model_dump_json(), hardware.model_dump_json(), model.model_dump_json(), shape, wanted
    )


def capacity_key(
    recipe: Recipe,
    hardware: Hardware,
    model: ModelArch,
    input_length: int,
    output_length: int,
    wanted: Targets,
) -> str:
    """What a capacity is searched from, as a short digest: a bot keeps its figures by it in
    its lease note, so that a bot that starts again (each `--once` run) does not search again."""
    shape = (_rounded(input_length), _rounded(output_length))
    text = "\n".join(
        (recipe.model_dump_json(), hardware.model_dump_json(), model.model_dump_json())
    )
    return hashlib.sha256(f"{text}\n{shape}\n{wanted}".encode()).hexdigest()[:24]


@functools.lru_cache(maxsize=256)
def _capacity(
    recipe_json: str,
    hardware_json: str,
    model_json: str,
    shape: tuple[int, int],
    wanted: Targets,
) -> float | None:
    """Cached by the inputs' JSON: a stage's capacity is searched once per shape."""
    recipe = Recipe.model_validate_json(recipe_json)
    hardware = Hardware.model_validate_json(hardware_json)
    model = ModelArch.model_validate_json(model_json)

    def holds(rate: float) -> bool:
        count = int(min(max(rate * SECONDS, 50), 1500))
        requests = traffic.poisson(traffic.fixed(shape[0], shape[1], count), rate)
        try:
            found = predict(recipe, hardware, model, requests, rate=rate)
        except (PredictionError, DenvError, ValueError):
            return False
        return found.errors == 0 and all(_meets(found, t) for t in wanted)

    if not holds(LOWEST):
        return None
    low, high = LOWEST, 1.0
    while holds(high):  # bracket: double until a rate misses
        low, high = high, high * 2
        if high > HIGHEST:
            return low
    for _ in range(BISECTIONS):
        middle = (low * high) ** 0.5
        low, high = (middle, high) if holds(middle) else (low, middle)
    return low


def _meets(found: Prediction, target: tuple[str, str, float]) -> bool:
    metric, stat, seconds = target
    pcts = {"ttft": found.ttft_ms, "itl": found.itl_ms, "tpot": found.tpot_ms}[metric]
    value = pcts.p50 if stat in ("p50", "mean") else pcts.p99  # p90/p95: p99, conservatively
    return value <= seconds * 1000


def _rounded(length: int) -> int:
    return max(LENGTH_STEP, round(length / LENGTH_STEP) * LENGTH_STEP)
