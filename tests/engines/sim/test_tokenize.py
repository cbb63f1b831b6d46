"""The simulator's `POST /tokenize`: vLLM's shapes, and the same ids a generation request with
that prompt runs (its usage counts them)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import openai
import pytest

from reconciler.engines.model.tokens import Tokenizer
from reconciler.engines.sim.protocol import ApiError
from reconciler.engines.sim.tokenize import tokenize
from tests.engines.sim.sims import Sim, http_get, http_post, sim_process, sim_spec, wait_until

MODEL = "llama-3.1-8b"
MESSAGES = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Count the words in this sentence, please."},
]


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sim]:
    with sim_process(sim_spec(time_scale=50.0), tmp_path_factory.mktemp("sim-logs")) as running:
        wait_until(lambda: http_get(running.url + "/health")[0] == 200, 10, "warm-up")
        yield running


def test_tokenize_counts_what_completions_and_chat_run(sim: Sim) -> None:
    client = openai.OpenAI(base_url=sim.url + "/v1", api_key="none", max_retries=0, timeout=20)
    prompt = "The quick brown fox jumps over the lazy dog, twice."
    status, body = http_post(sim.url + "/tokenize", {"model": MODEL, "prompt": prompt})
    assert status == 200
    assert set(body) == {"count", "max_model_len", "tokens", "token_strs"}
    done = client.completions.create(model=MODEL, prompt=prompt, max_tokens=1)
    assert done.usage is not None and body["count"] == done.usage.prompt_tokens
    assert len(body["tokens"]) == body["count"] and body["max_model_len"] > 0

    status, chat = http_post(sim.url + "/tokenize", {"model": MODEL, "messages": MESSAGES})
    answer = client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=1)
    assert status == 200 and answer.usage is not None
    assert chat["count"] == answer.usage.prompt_tokens


@pytest.mark.parametrize(
    ("body", "status", "param"),
    [
        ({"model": "other", "prompt": "hi"}, 404, "model"),
        ({"prompt": ["a", "b"]}, 400, "prompt"),
        ({}, 400, "prompt"),
        ([1, 2], 400, None),
        ({"messages": []}, 400, "messages"),
    ],
    ids=["unknown-model", "prompt-not-text", "empty", "not-an-object", "no-messages"],
)
def test_bad_bodies_are_refused_naming_the_field(body: Any, status: int, param: str | None) -> None:
    with pytest.raises(ApiError) as refused:
        tokenize(body, Tokenizer(1000), MODEL, 4096)
    assert refused.value.status == status and refused.value.param == param


def test_without_the_generation_prompt_the_template_ends_at_the_last_message() -> None:
    tokenizer = Tokenizer(128256)
    full = tokenize({"messages": MESSAGES}, tokenizer, MODEL, 4096)
    bare = tokenize({"messages": MESSAGES, "add_generation_prompt": False}, tokenizer, MODEL, 4096)
    assert full["tokens"][: bare["count"]] == bare["tokens"]
    assert full["count"] > bare["count"]
