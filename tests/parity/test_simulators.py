"""The default suite against real simulator processes (`denv sim serve`): the same weights on
two engines and two topologies pass 512/512; an fp8 KV cache and quantized weights fail on
exactly the prompts the simulator's documented rule perturbs (tokens.py: a hash decides which
answers diverge, and from which position); an endpoint dying mid-suite is an error."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from reconciler.engines.model.spec import SimSpec
from reconciler.engines.model.tokens import PERTURBED_FRACTION, Answers, Tokenizer
from reconciler.engines.sim.protocol import render_chat
from reconciler.errors import ParityError
from reconciler.parity.runner import RetryPolicy, run_parity
from reconciler.parity.suite import Suite
from reconciler.parity.suite_files import load_suite
from reconciler.spec.policy import ParityPolicy
from reconciler.spec.recipe import Recipe
from tests.conftest import ROOT
from tests.engines.sim.sims import Sim, sim_process, sim_spec

FAST = 1000.0  # simulated time runs this much faster: the suite's pace is the CPU's
RETRY = RetryPolicy(attempts=3, first_wait_s=0.05, max_wait_s=0.1, timeout_s=60)


@pytest.fixture(scope="module")
def suite() -> Suite:
    return load_suite(ROOT, "default")


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sim]:
    """vLLM, TP 1: the same weights id as every candidate below."""
    spec = sim_spec("llama-3.1-8b/vllm@1", time_scale=FAST)
    with sim_process(spec, tmp_path_factory.mktemp("reference")) as sim:
        yield sim


def sglang_tp2() -> SimSpec:
    spec = sim_spec("llama-3.1-8b/sglang@1", time_scale=FAST)
    topology = {"mode": "aggregated", "replicas": 1, "gpus": 2, "parallel": {"tp": 2}}
    recipe = Recipe.model_validate(spec.recipe.model_dump() | {"topology": topology})
    return spec.model_copy(update={"recipe": recipe, "gpus": 2})


def perturbed(suite: Suite, spec: SimSpec) -> tuple[list[str], int]:
    """The simulator's rule applied to each prompt as the server tokenizes it: the ids whose
    answer diverges within max_tokens, and how many answers it perturbs at all."""
    tokenizer = Tokenizer(spec.model.vocab_size)
    settings = spec.recipe.settings
    answers = Answers(
        spec.weights, spec.model.vocab_size, settings.quantization, settings.kv_cache.dtype
    )
    failing, touched = [], 0
    for prompt in suite.prompts:
        if prompt.messages is not None:
            text = render_chat([m.model_dump() for m in prompt.messages])
        else:
            text = prompt.prompt or ""
        answer = answers.plan(tokenizer.encode(text), 0.0, None)
        if answer.diverge_at is not None:
            touched += 1
            if answer.diverge_at < prompt.max_tokens:
                failing.append(prompt.id)
    return failing, touched


def test_same_weights_on_two_engines_and_topologies_pass(
    suite: Suite, reference: Sim, tmp_path: Path
) -> None:
    with sim_process(sglang_tp2(), tmp_path) as candidate:
        verdict = run_parity(reference.url, candidate.url, suite, ParityPolicy(), retry=RETRY)
    assert verdict.headline == "PARITY 512/512"
    assert verdict.ok and verdict.exact == 512 and not verdict.failures


@pytest.mark.parametrize(
    ("settings", "cause"),
    [({"kv_cache": {"dtype": "fp8"}}, "kv_fp8"), ({"quantization": "fp8"}, "quantization")],
    ids=["fp8-kv-cache", "quantized-weights"],
)
def test_perturbing_settings_fail_on_the_predicted_prompts(
    suite: Suite, reference: Sim, tmp_path: Path, settings: dict[str, object], cause: str
) -> None:
    spec = sim_spec("llama-3.1-8b/vllm@1", time_scale=FAST, settings=settings)
    expected, touched = perturbed(suite, spec)
    assert abs(touched / len(suite.prompts) - PERTURBED_FRACTION[cause]) < 0.05
    assert expected  # the suite is long enough to catch it
    with sim_process(spec, tmp_path) as candidate:
        verdict = run_parity(reference.url, candidate.url, suite, ParityPolicy(), retry=RETRY)
    assert verdict.headline == f"PARITY {512 - len(expected)}/512"
    assert [o.id for o in verdict.failures] == expected
    for outcome in verdict.failures:
        d = outcome.divergence
        assert d is not None and d.reference != d.candidate and not d.in_top_k


def test_an_endpoint_dying_mid_suite_is_an_error(
    suite: Suite, reference: Sim, tmp_path: Path
) -> None:
    spec = sim_spec("llama-3.1-8b/vllm@1", time_scale=FAST)
    with sim_process(spec, tmp_path, "--fault-crash-after", "100") as candidate:
        with pytest.raises(ParityError, match="did not run completely: candidate"):
            run_parity(reference.url, candidate.url, suite, ParityPolicy(), retry=RETRY)
        assert candidate.proc.wait(10) != 0
