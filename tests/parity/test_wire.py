"""Requests and answers in the OpenAI-compatible shapes: bodies the simulator renders are read
back token for token; answers without logprobs are refused; URLs are normalised."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.engines.model.tokens import Answers, Tokenizer
from reconciler.engines.sim.protocol import Render, parse
from reconciler.errors import UsageError
from reconciler.parity import wire
from reconciler.parity.suite import SuitePrompt

VOCAB = 128256
CHAT = SuitePrompt.model_validate(
    {"id": "c", "kind": "chat", "messages": [{"role": "user", "content": "Hi!"}], "max_tokens": 6}
)
COMPLETION = SuitePrompt.model_validate(
    {"id": "p", "kind": "completion", "prompt": "Once upon", "max_tokens": 6, "top_logprobs": 2}
)


def sim_body(prompt: SuitePrompt, top: int) -> tuple[dict[str, Any], list[str], list[list[str]]]:
    """What the simulator answers to our request, and the tokens and top lists it chose."""
    path, body = wire.request(prompt, "m", top)
    req = parse("chat" if path.endswith("chat/completions") else "completion", body, "m")
    tokenizer = Tokenizer(VOCAB)
    text = req.prompt_text or ""
    answer = Answers("hf://x/y@1", VOCAB).plan(tokenizer.encode(text), 0.0, None)
    render = Render(req, "id", "m", 0, "fp", tokenizer, answer)
    full = render.full(prompt.max_tokens, "length", 3)
    tokens = [tokenizer.text(t) for t in answer.tokens(0, prompt.max_tokens)]
    tops = [[tokenizer.text(t) for t, _ in answer.top(i, top)] for i in range(prompt.max_tokens)]
    return full, tokens, tops


@pytest.mark.parametrize("prompt", [CHAT, COMPLETION], ids=["chat", "completion"])
def test_simulator_answers_read_back_token_for_token(prompt: SuitePrompt) -> None:
    body, tokens, tops = sim_body(prompt, 5)
    got = wire.answer(prompt, body)
    assert list(got.tokens) == tokens
    assert [list(t) for t in got.top] == tops
    assert got.finish_reason == "length"


def test_requests_are_greedy_and_ask_for_top_logprobs() -> None:
    path, body = wire.request(CHAT, "m", 7)
    assert path == "/v1/chat/completions"
    assert body["temperature"] == 0 and body["logprobs"] is True and body["top_logprobs"] == 7
    assert body["messages"] == [{"role": "user", "content": "Hi!"}]
    path, body = wire.request(COMPLETION, "m", 5)
    assert (path, body["logprobs"], body["prompt"], body["max_tokens"]) == (
        "/v1/completions",
        5,
        "Once upon",
        6,
    )


@pytest.mark.parametrize(
    ("prompt", "body", "message"),
    [
        (CHAT, {"choices": []}, "no choices"),
        (CHAT, {"choices": [{"message": {"content": "hi"}, "logprobs": None}]}, "no logprobs"),
        (COMPLETION, {"choices": [{"text": "hi", "logprobs": None}]}, "no logprobs"),
        (
            COMPLETION,
            {"choices": [{"text": "a", "logprobs": {"tokens": ["a"], "top_logprobs": []}}]},
            "one entry per token",
        ),
    ],
    ids=["no-choices", "chat-no-logprobs", "completion-no-logprobs", "short-top"],
)
def test_answers_parity_cannot_compare_are_refused(
    prompt: SuitePrompt, body: dict[str, Any], message: str
) -> None:
    with pytest.raises(wire.BadAnswer, match=message):
        wire.answer(prompt, body)


def test_an_empty_answer_is_an_answer() -> None:
    body = {"choices": [{"message": {"content": ""}, "logprobs": None, "finish_reason": "stop"}]}
    assert wire.answer(CHAT, body) == wire.Answer((), (), "stop")


@pytest.mark.parametrize(
    ("url", "base"),
    [
        ("http://h:8000", "http://h:8000"),
        ("http://h:8000/", "http://h:8000"),
        ("http://h:8000/v1", "http://h:8000"),
        ("https://h/v1/", "https://h"),
        ("http://h/serving/llama/v1", "http://h/serving/llama"),
    ],
)
def test_endpoint_base(url: str, base: str) -> None:
    assert wire.endpoint_base(url) == base


@pytest.mark.parametrize("url", ["h:8000", "ftp://h/", "http://", "candidate-recipe@1"])
def test_endpoint_base_refuses_what_is_not_an_http_url(url: str) -> None:
    with pytest.raises(UsageError, match="not an http"):
        wire.endpoint_base(url)


def test_shown_urls_leave_credentials_out() -> None:
    assert wire.shown_url("https://user:s3cret@h:8443/x") == "https://h:8443/x"
