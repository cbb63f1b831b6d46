"""Engine cards: every registered card has every part `EngineCard` names, a card that lacks
one is refused by name, and a third engine (tests/engines/toy_card.py) plugs in by its card
and one registry entry: validate accepts its recipes and checks their args against its flag
table, launch renders its argv and its router, the runtime, the rollout alarms and the
optimizer find what they need of it."""

from __future__ import annotations

import importlib
import types
from pathlib import Path

import pytest

from reconciler.engines.cards import EngineCard, card, missing_parts
from reconciler.engines.model.perf import PerfModel
from reconciler.engines.model.predict import sim_spec
from reconciler.engines.recipe_args import check_engines
from reconciler.engines.runtime import HostRuntime, image_for, in_runtime
from reconciler.engines.versions import known_versions
from reconciler.errors import EngineError
from reconciler.optimize.feasible import engine_refusal
from reconciler.optimize.watch import catalog_marks
from reconciler.rollout.series import series_for
from reconciler.spec import engines as registry
from reconciler.spec.loader import open_repo
from reconciler.spec.recipe import Recipe
from reconciler.spec.repo import Repo
from reconciler.spec.schema import schema_for
from tests.engines import toy_card
from tests.engines.conftest import fleet, recipe, units_of

TOY = "tests.engines.toy_card"
PD = {
    "mode": "disaggregated",
    "prefill": {"gpus": 1, "parallel": {"tp": 1}},
    "decode": {"gpus": 2, "parallel": {"tp": 2}},
}


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> None:
    """The toy engine registered: one entry in the registry, nothing else touched."""
    monkeypatch.setitem(registry.ENGINE_CARDS, "toy", TOY)


@pytest.mark.parametrize("name", registry.engine_names())
def test_every_registered_card_has_every_part(name: str) -> None:
    module = importlib.import_module(registry.ENGINE_CARDS[name])
    assert missing_parts(module) == []
    assert isinstance(card(name), EngineCard)


def test_the_toy_card_has_every_part() -> None:
    assert missing_parts(toy_card) == []


def test_a_card_missing_a_part_is_refused_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    partial = types.ModuleType("partial_card")
    for name, value in vars(toy_card).items():
        if name not in ("check_recipe", "ALARM_SERIES"):
            setattr(partial, name, value)
    monkeypatch.setitem(__import__("sys").modules, "partial_card", partial)
    monkeypatch.setitem(registry.ENGINE_CARDS, "partial", "partial_card")
    assert missing_parts(partial) == ["ALARM_SERIES", "check_recipe"]
    with pytest.raises(EngineError, match="partial_card\\) lacks ALARM_SERIES, check_recipe"):
        card("partial")


def test_an_unregistered_engine_is_refused_naming_the_registered_ones() -> None:
    with pytest.raises(EngineError, match=r"engine 'toy' is not registered .* vllm, sglang, sim"):
        card("toy")


def test_the_spec_s_engine_names_come_from_the_registry(toy: None) -> None:
    assert schema_for("recipe")["$defs"]["EngineRef"]["properties"]["name"]["enum"] == [
        "vllm",
        "sglang",
        "sim",
        "toy",
    ]
    assert recipe("toy", "1.0").engine.name == "toy"


def test_an_unregistered_engine_name_is_refused_as_before() -> None:
    with pytest.raises(ValueError, match="Input should be 'vllm', 'sglang' or 'sim'"):
        recipe("toy", "1.0")


TOY_RECIPE = """\
recipe:
  id: llama-3.1-8b/toy@1
  model: llama-3.1-8b
  engine: {name: toy, version: 1.1.0}
  hardware: [h200]
  topology: {mode: aggregated, gpus: 1}
  args: [--verbose]
"""


def test_validate_accepts_a_toy_recipe_and_checks_its_args(toy: None, denv_repo: Path) -> None:
    path = denv_repo / "recipes/llama-3.1-8b/toy@1.yaml"
    path.write_text(TOY_RECIPE)
    repo = open_repo(denv_repo)
    assert repo.errors == [] and "llama-3.1-8b/toy@1" in repo.recipes
    assert check_engines(repo) == []
    path.write_text(TOY_RECIPE.replace("[--verbose]", "[--fast]").replace("1.1.0", "0.9.0"))
    problems = check_engines(open_repo(denv_repo))
    assert [(p.path, p.line) for p in problems] == [("recipes/llama-3.1-8b/toy@1.yaml", 4)]
    assert "toy 0.9.0 has no flag table in denv (it knows toy 1.0, 1.2)" in problems[0].message
    path.write_text(TOY_RECIPE.replace("[--verbose]", "[--fast]"))
    (problem,) = check_engines(open_repo(denv_repo))
    assert problem.message == (
        "recipe.args[0]: --fast is not a flag of toy 1.1.0 (flags as of toy 1.0) "
        "(did you mean --host? denv sets it from placement)"
    )


@pytest.fixture
def toy_recipe(toy: None) -> Recipe:
    return recipe("toy", "1.2", topology={"mode": "aggregated", "gpus": 2, "replicas": 2})


def test_launch_renders_the_toy_argv_and_the_router(toy_recipe: Recipe, repo: Repo) -> None:
    first, second, router = units_of(repo, toy_recipe, fleet(hosts=1))
    assert first.argv == [
        "toyserve", "run", "org/model", "--host", "10.0.0.1", "--port", "8032", "--tp", "2",
    ]  # fmt: skip
    assert (first.engine, first.flag_table, first.env) == (
        "toy",
        "toy 1.2",
        {"CUDA_VISIBLE_DEVICES": "0,1"},
    )
    assert first.readiness is not None and first.readiness.path == "/ping"
    assert first.metrics is not None and first.metrics.running == toy_card.RUNNING
    assert second.argv[5:7] == ["--port", "8064"]
    assert router.engine == "sglang-router"  # aggregated replicas: any engine's
    assert router.argv[7:10] == ["--worker-urls", "http://10.0.0.1:8032", "http://10.0.0.1:8064"]


def test_prefill_and_decode_get_the_card_s_router(toy: None, repo: Repo) -> None:
    *_, router = units_of(repo, recipe("toy", "1.0", topology=PD), fleet(hosts=1))
    assert router.engine == "toy-router"
    assert router.argv[:3] == ["python3", "-m", "toy_router.main"]
    assert router.argv[7:9] == ["--from=http://10.0.0.1:8032", "--to=http://10.0.0.1:8064"]


def test_the_runtime_uses_the_card_s_image_script_and_index(toy_recipe: Recipe, repo: Repo) -> None:
    engine, *_ = units_of(repo, toy_recipe, fleet(hosts=1))
    assert image_for("toy", "1.2", None) == "toy/toyserve:1.2"
    venv = in_runtime(engine, "u1", "1.2", HostRuntime(kind="venv", home="/h"))
    assert venv.unit.argv[:4] == ["/h/engines/toy-1.2/bin/python", "-m", "toyserve.cli", "run"]
    assert venv.need is not None and venv.need.index_urls == ("https://toy.example/simple",)
    docker = HostRuntime(kind="container", home="/h", container_engine="docker")
    boxed = in_runtime(engine, "u1", "1.2", docker)
    at = boxed.unit.argv.index("--entrypoint")
    assert boxed.unit.argv[at : at + 4] == ["--entrypoint", "toyserve", "toy/toyserve:1.2", "run"]
    *_, pd_router = units_of(repo, recipe("toy", "1.0", topology=PD), fleet(hosts=1))
    routed = in_runtime(pd_router, "r", "1.0", docker)
    assert routed.need is not None and routed.need.name == "toy-router-2.0"


def test_rollout_and_optimizer_ask_the_card(toy_recipe: Recipe, repo: Repo) -> None:
    assert series_for("toy") == toy_card.ALARM_SERIES
    assert known_versions("toy") == ["1.0", "1.2"]
    assert engine_refusal(toy_recipe, fleet()) is None
    offload = recipe("toy", "1.2", settings={"kv_cache": {"offload": "cpu"}})
    assert engine_refusal(offload, fleet()) == (
        "settings.kv_cache.offload cpu is not supported on toy: no offload"
    )
    assert {"engine toy 1.0", "engine toy 1.2"} <= set(catalog_marks(repo, "llama-3.1-8b"))
    hardware, model = repo.hardware["h200"], repo.models["llama-3.1-8b"]
    perf = PerfModel.from_spec(sim_spec(toy_recipe, hardware, model, "aggregated"))
    assert (perf.limits.max_batch, perf.limits.token_budget) == (8, 1024)
