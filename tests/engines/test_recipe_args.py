"""The check `denv validate` makes of recipe args and release overrides.args: the engine
modules' own rules, reported at the element's line; an engine override that makes a
recipe's own args fail is reported at the override."""

from __future__ import annotations

from pathlib import Path

from reconciler.engines.recipe_args import check_recipe_args, check_recipe_hardware
from reconciler.spec.loader import open_repo
from tests.conftest import Edit

SGLANG = "recipes/llama-3.1-8b/sglang@1.yaml"
RELEASE = "releases/chat-8b/denv.yaml"


def test_the_repository_s_args_pass(denv_repo: Path) -> None:
    assert check_recipe_args(open_repo(denv_repo)) == []


def test_an_engine_override_that_drops_a_flag_the_recipe_passes_is_refused_at_the_override(
    denv_repo: Path, edit: Edit
) -> None:
    # --cuda-graph-max-bs is a flag of sglang 0.5.12, gone by 0.5.23
    edit(SGLANG, "version: 0.5.23}", "version: 0.5.12}\n  args: [--cuda-graph-max-bs, '128']")
    edit(RELEASE, "recipe: llama-3.1-8b/vllm@1", "recipe: llama-3.1-8b/sglang@1")
    edit(RELEASE, "settings: { max_batch: 128 }", "engine: { version: 0.5.23 }")
    repo = open_repo(denv_repo)
    assert not repo.errors, repo.errors  # the recipe is fine on its own version
    (problem,) = check_recipe_args(repo)
    assert (problem.path, problem.line, problem.warning) == (RELEASE, 8, False)
    assert problem.message == (
        "release.overrides.engine.version: recipe llama-3.1-8b/sglang@1's args[0] on sglang "
        "0.5.23: --cuda-graph-max-bs is not a flag of sglang 0.5.23 (did you mean "
        "--cuda-graph-max-bs-decode?)"
    )


def test_a_recipe_whose_own_args_fail_is_reported_once_at_the_recipe(
    denv_repo: Path, edit: Edit
) -> None:
    edit(SGLANG, "version: 0.5.23}", "version: 0.5.23}\n  args: [--port, '1']")
    edit(RELEASE, "recipe: llama-3.1-8b/vllm@1", "recipe: llama-3.1-8b/sglang@1")
    edit(RELEASE, "settings: { max_batch: 128 }", "engine: { version: 0.5.23 }")
    problems = check_recipe_args(open_repo(denv_repo))
    assert [(p.path, p.line) for p in problems] == [(SGLANG, 6)]


def test_a_recipe_its_cpu_hardware_cannot_run_is_refused_at_that_hardware(
    denv_repo: Path, edit: Edit
) -> None:
    """Validate refuses what rendering would: SGLang on CPU cores, and a vLLM replica of more
    than one CPU worker; a one-worker vLLM recipe on x86-cpu passes."""
    vllm = "recipes/llama-3.1-8b/vllm@1.yaml"
    edit(SGLANG, "hardware: [h100, h200, b200]", "hardware: [h100, x86-cpu]")
    repo = open_repo(denv_repo)
    (problem,) = check_recipe_hardware(repo)
    assert (problem.path, problem.line, problem.warning) == (SGLANG, 6, False)
    assert problem.message == (
        "recipe.hardware[1]: x86-cpu: hardware x86-cpu is not supported on sglang 0.5.23: "
        "denv runs only vLLM's CPU build on CPU"
    )
    edit(SGLANG, "hardware: [h100, x86-cpu]", "hardware: [h100]")
    edit(vllm, "hardware: [h100, h200, b200]", "hardware: [x86-cpu]")
    assert check_recipe_hardware(open_repo(denv_repo)) == []
    edit(vllm, "tp: 1", "tp: 2")
    edit(vllm, "gpus: 1", "gpus: 2")
    (problem,) = check_recipe_hardware(open_repo(denv_repo))
    assert problem.message == (
        "recipe.hardware[0]: x86-cpu: topology.parallel.tp 2 is not supported on vllm-cpu on "
        "x86-cpu: denv runs one CPU worker per replica"
    )
