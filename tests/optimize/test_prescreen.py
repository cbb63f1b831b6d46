"""The pre-screen: candidates predicted by the simulator's model, ranked under the target."""

from __future__ import annotations

import pytest

from reconciler.catalog.latency import parse_latency_target
from reconciler.engines.sim import traffic
from reconciler.optimize.prescreen import MODEL_MARGIN, Scored, prescreen, promising
from reconciler.optimize.space import SearchSpace
from tests.optimize import spaces

REQUESTS = traffic.fixed(512, 128, 60)
CLIENTS = 32


@pytest.fixture(scope="module")
def space() -> SearchSpace:
    return spaces.space(levers=["parallel"], budget=4)  # 8 layouts of Llama 3.1 8B


@pytest.fixture(scope="module")
def scored(space: SearchSpace) -> list[Scored]:
    target = parse_latency_target("ttft:p99<400ms")
    grid = list(space.grid())
    return prescreen(space, grid, REQUESTS, target, "throughput", concurrency=CLIENTS)


def test_candidates_meeting_the_target_come_first_best_first(scored: list[Scored]) -> None:
    meets = [s for s in scored if s.meets]
    misses = [s for s in scored if not s.meets]
    assert meets and misses, "the target should split this grid"
    assert scored == meets + misses
    values = [s.value for s in meets]
    assert values == sorted(values, reverse=True)  # type: ignore[type-var]
    assert [s.violation for s in misses] == sorted(s.violation for s in misses)
    for s in misses:
        assert s.reason is not None and "TTFT p99" in s.reason


def test_predictions_are_labelled_simulated(space: SearchSpace, scored: list[Scored]) -> None:
    for s in scored:
        assert s.outcome is not None and s.outcome.simulated
        assert s.outcome.gpus == s.candidate.gpus
        assert s.value == s.outcome.metrics.output_tok_s_per_gpu
    # One GPU per replica keeps its batch to itself: the most tokens per GPU at this load.
    assert space.recipe_of(scored[0].candidate).topology.pools()[0][1].parallel.tp == 1


def test_cost_and_latency_goals_rank_lowest_first(space: SearchSpace) -> None:
    grid = list(space.grid())[:4]
    for goal in ("cost", "latency"):
        ranked = prescreen(space, grid, REQUESTS, None, goal, concurrency=CLIENTS)
        values = [s.value for s in ranked]
        assert None not in values
        assert values == sorted(values)  # type: ignore[type-var]


def test_progress_is_reported(space: SearchSpace) -> None:
    seen: list[tuple[int, int]] = []
    grid = list(space.grid())[:2]
    prescreen(
        space,
        grid,
        REQUESTS,
        None,
        "throughput",
        concurrency=CLIENTS,
        progress=lambda *p: seen.append(p),
    )
    assert seen == [(1, 2), (2, 2)]


def test_promising_keeps_near_misses_and_one_of_alike_predictions() -> None:
    space = spaces.space(levers=["parallel", "max_batch"], budget=2)
    target = parse_latency_target("ttft:p99<400ms")
    scored = prescreen(
        space, list(space.grid()), REQUESTS, target, "throughput", concurrency=CLIENTS
    )
    picks = promising(scored, "throughput")
    assert all(s.violation <= MODEL_MARGIN for s in picks)
    layouts = [space.recipe_of(s.candidate).topology for s in picks]
    assert len(layouts) == len({t.model_dump_json() for t in layouts})  # max_batch was moot
    values = [s.value for s in picks]
    assert values == sorted(values, reverse=True)  # type: ignore[type-var]
