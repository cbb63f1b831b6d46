"""bench/run_plan.py: `denv bench run`'s default requests a level — the guide's run on the
local fleet ends within two minutes as the simulator predicts it, a cut level says so, and
what no model predicts keeps the sweep's own default."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from reconciler.bench.run_info import parse_levels
from reconciler.bench.run_plan import LEVEL_BUDGET_S, LevelPlan, describe, plan_levels, simulated
from reconciler.bench.traffic import TraceLine, generate
from reconciler.cli.bench_run import DEFAULT_LEVELS
from reconciler.engines.model.predict import predict
from reconciler.engines.model.traffic import traced
from reconciler.spec.loader import open_repo
from reconciler.spec.repo import Repo
from tests.conftest import ROOT

GUIDE_RECIPE = "llama-3.1-8b/vllm@1"  # chat-8b's recipe, as the guides run it
# The whole run on the local fleet: the sweep as predicted, and the deployment's start and
# teardown (about 5 s on an idle machine, 25 s on a busy 2-core one: docs/benchmarks.md).
RUN_S = 120.0
DEPLOY_S = 25.0


@pytest.fixture(scope="module")
def repo() -> Repo:
    return open_repo(ROOT)


def per_line(seconds: float) -> object:
    """A model in which each request takes `seconds` at any concurrency, rounds alike."""

    def predicted(lines: Sequence[TraceLine], clients: int) -> float:
        return seconds * -(-len(lines) // clients)

    return predicted


def lines(count: int) -> list[TraceLine]:
    return [
        TraceLine(timestamp=i * 500, input_length=100, output_length=10, hash_ids=[i])
        for i in range(count)
    ]


@pytest.mark.parametrize(
    ("seconds", "level", "expected"),
    [
        (0.1, 1, LevelPlan(1, 50, 50, 0.1 * 50)),  # fast: the sweep's own default
        (7.0, 1, LevelPlan(1, 3, 50, 21.0)),  # slow: what fits in the budget
        (60.0, 1, LevelPlan(1, 2, 50, 120.0)),  # slower still: never below two rounds
        (20.0, 32, LevelPlan(32, 64, 352, 40.0)),
    ],
    ids=["fits", "cut", "floor", "floor-32-clients"],
)
def test_closed_loop_levels_fit_the_budget(seconds: float, level: int, expected: LevelPlan) -> None:
    [planned] = plan_levels(lines(1000), "concurrency", [level], per_line(seconds))  # type: ignore[arg-type]
    assert planned == expected


def test_without_a_model_a_level_keeps_its_default() -> None:
    assert plan_levels(lines(1000), "concurrency", [8], lambda _l, _c: None) == [
        LevelPlan(8, 88, 88)
    ]


def test_open_loop_sends_a_budget_of_arrivals() -> None:
    planned = plan_levels(lines(1000), "rate", [2.0, 100.0], lambda _l, _c: None)
    assert [(p.requests, p.default) for p in planned] == [(51, 1000), (1000, 1000)]


def test_a_cut_run_says_how_to_ask_for_more() -> None:
    planned = plan_levels(lines(1000), "concurrency", [1, 8], per_line(7.0))  # type: ignore[arg-type]
    said = describe(planned, "concurrency")
    assert said[0] == "concurrency 1: 3 requests of a default 50 (about 21 s predicted)"
    assert said[-1].endswith("give --requests N")
    assert describe(plan_levels(lines(10), "concurrency", [1], per_line(0.1)), "concurrency") == []  # type: ignore[arg-type]


@pytest.mark.parametrize("workload", ["agent", "chat"])
def test_the_guides_run_on_the_local_fleet_is_predicted_within_two_minutes(
    repo: Repo, workload: str
) -> None:
    """The guide's traffic (a trace of the shape `denv traffic generate` writes: 1,000 lines)
    at the default levels; agent's 1,000-token answers took 10 minutes before the budget."""
    recipe = repo.recipes[GUIDE_RECIPE]
    hardware = repo.resolve_hardware(repo.fleets["local"].hardware)
    model = repo.models[recipe.model]
    assert hardware is not None
    trace = generate(workload, 1000, 0, profiles=repo.workloads)
    levels = parse_levels(DEFAULT_LEVELS, "--concurrency")
    planned = plan_levels(trace, "concurrency", levels, simulated(recipe, hardware, model))
    sweep_s = [
        predict(recipe, hardware, model, traced(trace[: p.requests]), int(p.level), 0).duration_s
        for p in planned
    ]
    assert sum(sweep_s) + DEPLOY_S < RUN_S, list(zip(planned, sweep_s, strict=True))
    for p, took in zip(planned, sweep_s, strict=True):  # none cut below what fits
        assert p.requests == p.default or took > LEVEL_BUDGET_S * 0.5 or p.requests == 2 * p.level
