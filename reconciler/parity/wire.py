"""Pure logic: the OpenAI-compatible wire format as parity uses it — endpoint URLs, greedy
request bodies with logprobs, and answers read back as tokens with their top alternatives
(the shapes vLLM and SGLang return for `/v1/chat/completions` and `/v1/completions`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from reconciler.errors import UsageError
from reconciler.parity.suite import SuitePrompt


class BadAnswer(ValueError):
    """A response body that does not carry what parity compares (tokens and logprobs)."""


@dataclass(frozen=True)
class Answer:
    """One greedy answer: its tokens (as the server spells them), and per position the
    alternatives the server listed, most likely first."""

    tokens: tuple[str, ...]
    top: tuple[tuple[str, ...], ...]
    finish_reason: str | None


def endpoint_base(url: str) -> str:
    """The server root of an OpenAI-compatible URL: `http://h:8000/v1/` -> `http://h:8000`."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"'{url}' is not an http(s) URL of an OpenAI-compatible server")
    path = parts.path.rstrip("/").removesuffix("/v1").rstrip("/")
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def shown_url(url: str) -> str:
    """A URL fit for logs and verdicts: any user:password@ left out."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def request(prompt: SuitePrompt, model: str, top_logprobs: int) -> tuple[str, dict[str, Any]]:
    """The path and body of a greedy request for `prompt` asking `top_logprobs` alternatives."""
    body: dict[str, Any] = {"model": model, "max_tokens": prompt.max_tokens, "temperature": 0}
    if prompt.kind == "chat":
        assert prompt.messages is not None
        body["messages"] = [m.model_dump() for m in prompt.messages]
        body |= {"logprobs": True, "top_logprobs": top_logprobs}
        return "/v1/chat/completions", body
    body |= {"prompt": prompt.prompt, "logprobs": top_logprobs}
    return "/v1/completions", body


def _choice(body: Any) -> dict[str, Any]:
    choices = body.get("choices") if isinstance(body, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise BadAnswer("the response has no choices")
    choice: dict[str, Any] = choices[0]
    return choice


def _ranked(pairs: list[tuple[Any, Any]]) -> tuple[str, ...]:
    if not all(isinstance(t, str) and isinstance(lp, int | float) for t, lp in pairs):
        raise BadAnswer("top logprobs must pair token text with a number")
    return tuple(t for t, _ in sorted(pairs, key=lambda p: -float(p[1])))


def _chat_answer(choice: dict[str, Any]) -> Answer:
    logprobs = choice.get("logprobs") or {}
    content = logprobs.get("content") if isinstance(logprobs, dict) else None
    text = (choice.get("message") or {}).get("content") or ""
    if content is None:
        if text:
            raise BadAnswer("the answer carries no logprobs")
        content = []
    if not isinstance(content, list) or not all(isinstance(e, dict) for e in content):
        raise BadAnswer("logprobs.content must be a list of objects")
    tokens, tops = [], []
    for entry in content:
        token = entry.get("token")
        if not isinstance(token, str):
            raise BadAnswer("a logprobs entry has no token")
        alternatives = entry.get("top_logprobs") or []
        if not isinstance(alternatives, list) or not all(isinstance(a, dict) for a in alternatives):
            raise BadAnswer("top_logprobs must be a list of objects")
        tokens.append(token)
        tops.append(_ranked([(a.get("token"), a.get("logprob")) for a in alternatives]))
    return Answer(tuple(tokens), tuple(tops), choice.get("finish_reason"))


def _completion_answer(choice: dict[str, Any]) -> Answer:
    logprobs = choice.get("logprobs")
    if not isinstance(logprobs, dict):
        if choice.get("text"):
            raise BadAnswer("the answer carries no logprobs")
        return Answer((), (), choice.get("finish_reason"))
    tokens = logprobs.get("tokens") or []
    tops = logprobs.get("top_logprobs") or []
    if not isinstance(tokens, list) or not all(isinstance(t, str) for t in tokens):
        raise BadAnswer("logprobs.tokens must be a list of strings")
    if not isinstance(tops, list) or len(tops) != len(tokens):
        raise BadAnswer("logprobs.top_logprobs must have one entry per token")
    ranked = []
    for top in tops:
        if top is not None and not isinstance(top, dict):
            raise BadAnswer("a top_logprobs entry must be an object")
        ranked.append(_ranked(list((top or {}).items())))
    return Answer(tuple(tokens), tuple(ranked), choice.get("finish_reason"))


def answer(prompt: SuitePrompt, body: Any) -> Answer:
    """The answer in a response body to `request(prompt, ...)`; BadAnswer says what is amiss."""
    choice = _choice(body)
    if prompt.kind == "chat":
        return _chat_answer(choice)
    return _completion_answer(choice)
