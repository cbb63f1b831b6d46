"""The search space: levers, constraints (budget, domain, memory, engine flags), candidates."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import pytest

from reconciler.errors import NotFound
from reconciler.optimize import levers as lv
from reconciler.optimize.space import Candidate, Infeasible, SearchSpace
from reconciler.spec.loader import open_repo
from reconciler.spec.policy import OptimizerRules
from reconciler.spec.recipe import AggregatedTopology, Parallel, total_gpus
from tests.conftest import ROOT
from tests.optimize import spaces

CHAT_8B = {"settings": {"max_batch": 128}}
TWO_REPLICAS = AggregatedTopology(mode="aggregated", replicas=2, gpus=1)


def chat_8b(**kwargs: Any) -> SearchSpace:
    """Like the example release chat-8b: max_batch 128, two replicas of one GPU."""
    return spaces.space(overrides=CHAT_8B, topology=TWO_REPLICAS, **kwargs)


class FirstOrPicked:
    """A trial that answers each lever from `picked`, else with its first (current) choice."""

    def __init__(self, picked: dict[str, Any]) -> None:
        self.picked = picked
        self.asked: list[str] = []

    def suggest_categorical(self, name: str, choices: Sequence[Any]) -> Any:
        self.asked.append(name)
        return self.picked.get(name, choices[0])


def test_current_is_the_release_as_it_runs() -> None:
    current = chat_8b().current()
    assert re.fullmatch(r"c-[0-9a-f]{6}", current.id)
    assert (current.overrides, current.change, current.gpus) == ({}, "current", 2)
    assert chat_8b().build(current.choices) == current  # its lever values name it again


def test_every_grid_candidate_is_distinct_and_fits() -> None:
    space = chat_8b(levers=["parallel", "disaggregated", "max_batch"], budget=4)
    grid = list(space.grid())
    assert len({c.id for c in grid}) == len(grid) > 20
    for candidate in grid:
        recipe = space.recipe_of(candidate)
        assert candidate.gpus == total_gpus(recipe.topology) <= 4
    modes = {space.recipe_of(c).topology.mode for c in grid}
    assert modes == {"aggregated", "disaggregated"}
    assert space.size() >= len(grid)


@pytest.mark.parametrize(
    ("recipe", "choices", "rules", "reason"),
    [
        (
            "llama-3.1-8b/vllm@1",
            {"mode": "disaggregated", "prefill": "tp4 ×1", "decode": "tp2 ×3"},
            None,
            "needs 10 GPUs; the budget is 8",
        ),
        ("llama-3.1-70b/vllm@1", {"layout": "tp1 ×1"}, None, "GB of weights per GPU"),
        (
            "llama-3.1-8b/vllm@1",
            {"quantization": "int4"},
            OptimizerRules(allow_quantization=["int4"]),
            "int4 names no one method",
        ),
        (
            "qwen3-235b-a22b/sglang@1",
            {"layout": "tp4 ×1", "ep": True, "dp_attention": True, "speculative": "ngram:9"},
            None,
            "ngram",
        ),
        (
            "qwen3-235b-a22b/sglang@1",
            {"layout": "tp8 ×1", "dp_attention": True, "speculative": "ngram:2"},
            None,
            "SGLang's ngram drafting does not run with attention DP",
        ),
    ],
    ids=[
        "over-budget",
        "weights-do-not-fit",
        "engine-refuses-setting",
        "not-a-choice",
        "engine-refuses-setting-with-layout",
    ],
)
def test_infeasible_candidates_say_why(
    recipe: str, choices: dict[str, Any], rules: OptimizerRules | None, reason: str
) -> None:
    built = spaces.space(recipe, rules=rules).build(choices)
    assert isinstance(built, Infeasible)
    assert reason in built.reason


def test_candidates_fit_the_fleets_domain_and_serving_gpus() -> None:
    narrow = spaces.space(on=spaces.fleet(domain=4), budget=8)
    layouts = next(lever for lever in narrow.levers if lever.name == lv.LAYOUT).choices
    assert "tp8 ×1" not in layouts and "tp4 ×2" in layouts
    small = spaces.space(on=spaces.fleet(gpus=12, trial_gpus=8), budget=8)
    built = small.build({"layout": "tp2 ×4"})
    assert isinstance(built, Infeasible)
    assert built.reason == "needs 8 GPUs; lab has 4 for serving (12 minus 8 trial GPUs)"


def test_levers_follow_the_rules() -> None:
    names = {lever.name for lever in chat_8b().levers}
    assert lv.QUANTIZATION not in names  # none allowed by default
    assert {lv.ENGINE, lv.LAYOUT, lv.MODE, lv.SPECULATIVE, lv.KV_DTYPE} <= names
    assert lv.EP not in names  # a dense model has no experts
    strict = chat_8b(rules=OptimizerRules(allow_engine_change=False, allow_quantization=["fp8"]))
    names = {lever.name for lever in strict.levers}
    assert lv.ENGINE not in names
    quant = next(lever for lever in strict.levers if lever.name == lv.QUANTIZATION)
    assert quant.choices == ("none", "fp8")


def test_change_reads_against_the_current_recipe() -> None:
    built = chat_8b().build({"layout": "tp2 ×1", "max_batch": 256, "kv_dtype": "fp8"})
    assert isinstance(built, Candidate)
    assert built.change == "tp 1→2, replicas 2→1, max_batch 128→256, kv_cache.dtype auto→fp8"
    assert built.gpus == 2


def test_release_edit_merges_the_release_overrides() -> None:
    space = chat_8b()
    built = space.build({"kv_dtype": "fp8"})
    assert isinstance(built, Candidate)
    edit = space.release_edit(built)
    assert edit.recipe == "llama-3.1-8b/vllm@1"
    assert edit.overrides == {"settings": {"max_batch": 128, "kv_cache": {"dtype": "fp8"}}}
    assert edit.topology == {"mode": "aggregated", "replicas": 2, "gpus": 1}
    assert space.recipe_of(built).settings.kv_cache.dtype == "fp8"


def test_another_recipe_for_the_model_keeps_the_settings() -> None:
    space = chat_8b()
    built = space.build({"engine": "llama-3.1-8b/sglang@1 sglang 0.5.23"})
    assert isinstance(built, Candidate)
    recipe = space.recipe_of(built)
    assert (recipe.id, recipe.engine.name, recipe.settings.max_batch) == (
        "llama-3.1-8b/sglang@1",
        "sglang",
        128,
    )
    assert "recipe llama-3.1-8b/vllm@1→llama-3.1-8b/sglang@1" in built.change


def test_speculative_choices_replace_the_whole_block() -> None:
    space = spaces.space("deepseek-r1/sglang-fp8-h200-tp8-mtp@1", levers=["speculative"])
    choices = next(lever for lever in space.levers if lever.name == lv.SPECULATIVE).choices
    assert choices[:3] == ("mtp:2", "none", "ngram:2")
    built = space.build({"speculative": "none"})
    assert isinstance(built, Candidate)
    speculative = space.recipe_of(built).settings.speculative
    assert (speculative.method, speculative.draft_tokens) == ("none", None)


def test_moe_layouts_search_expert_parallelism() -> None:
    space = spaces.space("qwen3-235b-a22b/vllm@1", levers=["parallel"])
    built = space.build({"layout": "tp8 ×1", "ep": True})
    assert isinstance(built, Candidate)
    assert space.recipe_of(built).topology == AggregatedTopology(
        mode="aggregated", gpus=8, parallel=Parallel(tp=8, ep=8)
    )


def test_suggest_asks_only_the_chosen_modes_levers() -> None:
    space = chat_8b(levers=["parallel", "disaggregated"])
    trial = FirstOrPicked({"mode": "disaggregated", "prefill": "tp1 ×1", "decode": "tp2 ×1"})
    candidate = space.suggest(trial)
    assert candidate is not None and candidate.gpus == 3
    assert trial.asked == ["mode", "prefill", "decode"]
    assert space.suggest(FirstOrPicked({"mode": "disaggregated", "prefill": "tp8 ×1"})) is None


def test_sample_draws_distinct_feasible_candidates() -> None:
    drawn = chat_8b().sample(30, seed=1)
    assert len({c.id for c in drawn}) == len(drawn) == 30
    assert drawn == chat_8b().sample(30, seed=1)  # the same seed, the same draw


def test_for_release_reads_the_release_on_its_fleet() -> None:
    repo = spaces.repo()
    space = SearchSpace.for_release(repo, "chat-8b", "local", 8, repo.policies.optimizer)
    assert space.current().gpus == total_gpus(space.now.topology)
    assert space.now.id == repo.releases["chat-8b"].release.recipe
    names = {lever.name for lever in space.levers}
    assert lv.KV_OFFLOAD not in names  # the local fleet is simulated
    assert space.gpu_hour is not None  # no fleet price: the default public offer's
    with pytest.raises(NotFound, match="runs nowhere on fleet h200-use1"):
        SearchSpace.for_release(repo, "chat-8b", "h200-use1", 8, repo.policies.optimizer)


def every_recipe() -> list[Any]:
    return sorted(open_repo(ROOT).recipes.values(), key=lambda r: r.id)


@pytest.mark.parametrize("recipe", every_recipe(), ids=lambda r: r.id)
def test_the_levers_read_every_recipe_as_it_is(recipe: Any) -> None:
    """The optimizer starts from the recipe as it runs: its layout levers give back its
    topology (tp1 dp8 ep8 read as one GPU once). Pipeline parallel is not a lever."""
    topology = recipe.topology
    pools = [topology] if topology.mode == "aggregated" else [topology.prefill, topology.decode]
    if any(p.parallel.pp > 1 for p in pools):
        pytest.skip("pipeline parallel is not a lever")
    if len({(lv.ep_value(p.parallel), p.parallel.dp_attention) for p in pools}) > 1:
        pytest.skip("prefill and decode differ in EP or DP attention: one lever sets both")
    values = lv.current_values(recipe)
    again = lv.topology_of(values)
    assert total_gpus(again) == total_gpus(topology)
    if topology.mode == "aggregated":
        assert (again.replicas, again.parallel) == (topology.replicas, topology.parallel)
    else:
        for mine, theirs in ((again.prefill, topology.prefill), (again.decode, topology.decode)):
            assert (mine.replicas, mine.parallel) == (theirs.replicas, theirs.parallel)
