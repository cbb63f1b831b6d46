"""The pre-screen: candidates predicted by the simulator's model — the same capacity search a
trial runs, in virtual time — ranked under the target; and the goal it predicts, goodput per
GPU at capacity, which halving a deployment's replicas does not game."""

from __future__ import annotations

import pytest

from reconciler.catalog.latency import parse_latency_target
from reconciler.engines.model.predict import predict
from reconciler.engines.model.traffic import traced
from reconciler.optimize.prescreen import MODEL_MARGIN, Scored, prescreen, promising
from reconciler.optimize.space import SearchSpace
from reconciler.optimize.workload import Workload
from reconciler.spec.recipe import AggregatedTopology
from reconciler.spec.result import TrafficLine
from tests.optimize import spaces

# 10 requests a second, 512 tokens in and 128 out, no shared prefix
LINES = [
    TrafficLine(timestamp=100 * i, input_length=512, output_length=128, hash_ids=[1000 + i])
    for i in range(60)
]


def work(target: str | None, goal: str = "throughput") -> Workload:
    return Workload(
        lines=LINES,
        goal=goal,  # type: ignore[arg-type]
        target=parse_latency_target(target) if target else None,
        requests=40,
        run_s=2.0,
        gpu_hour=3.0,
    )


@pytest.fixture(scope="module")
def space() -> SearchSpace:
    return spaces.space(levers=["parallel"], budget=4)  # 7 layouts of Llama 3.1 8B


@pytest.fixture(scope="module")
def scored(space: SearchSpace) -> list[Scored]:
    return prescreen(space, list(space.grid()), work("ttft:p99<400ms"))


def test_candidates_are_ranked_best_goal_figure_first(scored: list[Scored]) -> None:
    assert all(s.meets for s in scored), [s.reason for s in scored]
    values = [s.value for s in scored]
    assert values == sorted(values, reverse=True)  # type: ignore[type-var]


def test_a_target_no_rate_meets_ranks_last_nearest_first(space: SearchSpace) -> None:
    # 512 prompt tokens take longer than 25 ms to prefill on one GPU at any rate
    grid = list(space.grid())[:3]
    missed = prescreen(space, grid, work("ttft:p99<25ms"))
    assert all(not s.meets for s in missed)
    assert [s.violation for s in missed] == sorted(s.violation for s in missed)
    for s in missed:
        assert s.reason is not None and "TTFT p99" in s.reason


def test_predictions_are_goodput_per_gpu_at_capacity(
    space: SearchSpace, scored: list[Scored]
) -> None:
    for s in scored:
        outcome = s.outcome
        assert outcome is not None and outcome.simulated and outcome.served is not None
        assert outcome.gpus == s.candidate.gpus
        assert s.value == round(outcome.served.goodput_rps / outcome.gpus, 4)
        # at capacity all but the slowest requests meet the target: goodput is about the rate
        assert outcome.rate is not None and s.value is not None
        assert 0.95 * outcome.rate / outcome.gpus <= s.value <= outcome.rate / outcome.gpus


def test_cost_and_latency_goals_rank_lowest_first(space: SearchSpace) -> None:
    grid = list(space.grid())[:3]
    for goal in ("cost", "latency"):
        ranked = prescreen(space, grid, work(None, goal))
        values = [s.value for s in ranked]
        assert None not in values
        assert values == sorted(values)  # type: ignore[type-var]


def test_progress_is_reported(space: SearchSpace) -> None:
    seen: list[tuple[int, int]] = []
    grid = list(space.grid())[:2]
    prescreen(space, grid, work(None, "latency"), progress=lambda *p: seen.append(p))
    assert seen == [(1, 2), (2, 2)]


def test_promising_keeps_near_misses_and_one_of_alike_predictions(scored: list[Scored]) -> None:
    picks = promising(scored, "throughput")
    assert picks and all(s.violation <= MODEL_MARGIN for s in picks)
    values = [s.value for s in picks]
    assert values == sorted(values, reverse=True)  # type: ignore[type-var]


# The demo's traffic: 20 requests a second, 600 tokens in and 16 out, one shared block.
DEMO = [
    TrafficLine(timestamp=50 * i, input_length=600, output_length=16, hash_ids=[1, 100 + i])
    for i in range(48)
]


def test_halving_the_replicas_does_not_look_better() -> None:
    """The old goal, tok/s/GPU at 16 closed-loop clients, made one replica of max_batch 16
    look far better than two under the same 16 clients: each GPU simply had more of them.
    Goodput per GPU at the highest rate that holds the target does not reward it."""
    target = parse_latency_target("ttft:p99<1.5s")
    demo = Workload(lines=DEMO, goal="throughput", target=target, requests=48, run_s=3.0)
    figures = {}
    for replicas in (2, 1):
        topology = AggregatedTopology(mode="aggregated", replicas=replicas, gpus=1)
        space = spaces.space(overrides={"settings": {"max_batch": 16}}, topology=topology)
        recipe = space.recipe_of(space.current())
        old = predict(recipe, space.hardware, space.model, traced(DEMO), 16)
        (new,) = prescreen(space, [space.current()], demo)
        assert new.meets and new.outcome is not None
        figures[replicas] = (old.output_tok_s_per_gpu, new.value, new.outcome.rate)
    (old_two, two, two_rate), (old_one, one, one_rate) = figures[2], figures[1]
    assert old_one / old_two - 1 > 0.5  # the gaming the old goal rewarded
    assert one is not None and two is not None and one <= two  # no more per GPU with one
    assert one_rate is not None and two_rate is not None and one_rate < two_rate
