"""What `denv deploy` may deploy, the nearest result it may when it may not, and the release file
it writes (pure: reconciler/catalog/deployable.py)."""

from __future__ import annotations

import pytest

from reconciler.catalog.deployable import (
    ReleaseDraft,
    nearest_deployable,
    pinned_weights,
    refusal,
    release_text,
)
from reconciler.spec.catalog import ModelArch
from reconciler.spec.recipe import AggregatedTopology, Recipe
from reconciler.spec.release import Release
from reconciler.spec.yamlio import parse_yaml, plain
from tests.catalog.factories import result

RECIPES = {
    rid: Recipe.model_validate(
        {
            "id": rid,
            "model": "llama-3.1-8b",
            "engine": {"name": engine, "version": "0.5.9"},
            "hardware": hardware,
            "topology": {"mode": "aggregated", "gpus": 1},
        }
    )
    for rid, engine, hardware in (
        ("llama-3.1-8b/sglang@1", "sglang", ["h200"]),
        ("llama-3.1-8b/vllm@1", "vllm", ["b200"]),
    )
}
SHA = "0e9e39f249a16976918f6564b8830bc894c89659"


@pytest.mark.parametrize(
    ("engine", "recipe", "why"),
    [
        ("sglang", "llama-3.1-8b/sglang@1", None),
        ("trt-llm", None, "it ran trt-llm, which denv cannot launch (denv launches vllm, sglang)"),
        ("sglang", None, "it names no denv recipe, so denv does not know how to start it"),
        ("vllm", "llama-3.1-8b/vllm@9", "its recipe llama-3.1-8b/vllm@9 is not in recipes/"),
    ],
    ids=["deployable", "engine-denv-cannot-launch", "no-recipe", "unknown-recipe"],
)
def test_refusal(engine: str, recipe: str | None, why: str | None) -> None:
    assert refusal(result(engine=engine, recipe=recipe), RECIPES) == why


def test_refusal_names_the_orchestrator() -> None:
    ran = result(engine="trt-llm").model_copy(
        update={
            "engine": result(engine="trt-llm").engine.model_copy(update={"orchestrator": "dynamo"})
        }
    )
    assert refusal(ran, RECIPES) == (
        "it ran trt-llm under dynamo, which denv cannot launch (denv launches vllm, sglang)"
    )


def test_nearest_prefers_model_then_target_then_hardware_then_load() -> None:
    trt = result("trt", model="llama-3.1-8b", engine="trt-llm", concurrency=64)
    other_model = result("other-model", model="llama-3.1-70b", recipe="llama-3.1-8b/sglang@1")
    far_load = result(
        "far-load", model="llama-3.1-8b", recipe="llama-3.1-8b/sglang@1", concurrency=1
    )
    near_load = result(
        "near-load", model="llama-3.1-8b", recipe="llama-3.1-8b/sglang@1", concurrency=32
    )
    other_hw = result(
        "other-hw",
        model="llama-3.1-8b",
        hardware="b200",
        engine="vllm",
        recipe="llama-3.1-8b/vllm@1",
        concurrency=64,
    )
    candidates = [trt, other_model, far_load, near_load, other_hw]
    assert nearest_deployable(trt, candidates, RECIPES, {}).id == "near-load"
    # a recipe that runs on the target wins over the same hardware as the result
    on_b200 = nearest_deployable(trt, candidates, RECIPES, {}, lambda r: "b200" in r.hardware)
    assert on_b200 is not None and on_b200.id == "other-hw"
    assert nearest_deployable(trt, [trt], RECIPES, {}) is None


def test_pinned_weights_need_repo_and_commit() -> None:
    base = {
        "id": "llama-3.1-8b",
        "name": "Llama-3.1-8B-Instruct",
        "params_b": 8,
        "layers": 32,
        "hidden_size": 4096,
        "attention_heads": 32,
        "kv_heads": 8,
        "head_dim": 128,
        "vocab_size": 128256,
        "max_context": 131072,
        "source": {"url": "https://example.org/config.json"},
    }
    pin = {"commit": SHA, "source": {"url": "https://example.org/pin"}}
    pinned = ModelArch.model_validate(
        {**base, "hf_repo": "meta-llama/Llama-3.1-8B-Instruct", "weights": pin}
    )
    assert pinned_weights(pinned) == f"hf://meta-llama/Llama-3.1-8B-Instruct@{SHA}"
    assert pinned_weights(ModelArch.model_validate({**base, "hf_repo": "a/b"})) is None


def test_release_text_is_the_commented_template_filled_in() -> None:
    draft = ReleaseDraft(
        name="chat-small",
        weights=f"hf://meta-llama/Llama-3.1-8B-Instruct@{SHA}",
        recipe="llama-3.1-8b/sglang@1",
        fleet="local",
        stage="canary",
        origin="recipe llama-3.1-8b/sglang@1",
    )
    assert draft.path == "releases/chat-small/denv.yaml"
    assert release_text(draft) == (
        "# yaml-language-server: $schema=../../schemas/release.schema.json\n"
        "# Written by `denv deploy` from recipe llama-3.1-8b/sglang@1.\n"
        "release:\n"
        "  model: chat-small  # the name clients ask for\n"
        f"  weights: hf://meta-llama/Llama-3.1-8B-Instruct@{SHA}  # pinned by commit "
        "(catalog/models.yaml)\n"
        "  recipe: llama-3.1-8b/sglang@1\n"
        "stages:\n"
        "  - name: canary\n"
        "    fleets: [local]\n"
    )


def test_release_text_with_a_topology_reads_back_as_a_valid_release() -> None:
    topology = AggregatedTopology(mode="aggregated", replicas=2, gpus=2, parallel={"tp": 2})
    draft = ReleaseDraft(
        name="chat-tp2",
        weights=f"hf://meta-llama/Llama-3.1-8B-Instruct@{SHA}",
        recipe="llama-3.1-8b/sglang@1",
        fleet="local",
        stage="canary",
        origin="result r1 (measured)",
        topology=topology,
    )
    text = release_text(draft)
    assert text.startswith("# yaml-language-server:") and "# the name clients ask for" in text
    doc, problem = parse_yaml(draft.path, text.encode())
    assert problem is None and doc is not None
    release = Release.model_validate(plain(doc.data))
    assert release.release.topology == topology
    assert release.stages[0].fleets == ["local"]
