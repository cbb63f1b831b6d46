"""Pure logic: the OpenAI-compatible wire format — request bodies in, response bodies and
server-sent-event chunks out, in the shapes vLLM and SGLang use (engines.md)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from reconciler.engines.model.tokens import MAX_TOP_LOGPROBS, Answer, Tokenizer, chat_prompt

Kind = Literal["completion", "chat"]
DONE = b"data: [DONE]\n\n"


class ApiError(Exception):
    """A refusal answered as an OpenAI-style error body with an HTTP status."""

    def __init__(self, status: int, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param

    def body(self) -> dict[str, Any]:
        kinds = {400: "BadRequestError", 404: "NotFoundError", 503: "ServiceUnavailableError"}
        kind = kinds.get(self.status, "InternalServerError")
        return {
            "error": {
                "message": self.message,
                "type": kind,
                "param": self.param,
                "code": self.status,
            }
        }


@dataclass(frozen=True)
class Bootstrap:
    """Where a P/D decode request finds its prefill's KV (as sglang-router sends it)."""

    host: str
    port: int
    room: int


@dataclass(frozen=True)
class GenRequest:
    kind: Kind
    prompt_ids: list[int] | None  # token ids as given
    prompt_text: str | None  # text to tokenize
    max_tokens: int | None
    ignore_eos: bool = False
    temperature: float = 1.0
    seed: int | None = None
    logprobs: int | None = None  # None: none; k: the top k (chat's top_logprobs)
    stream: bool = False
    include_usage: bool = False
    bootstrap: Bootstrap | None = None


def _int(body: dict[str, Any], key: str, low: int, high: int | None = None) -> int | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ApiError(400, f"{key} must be an integer", key)
    if value < low or (high is not None and value > high):
        bound = f"between {low} and {high}" if high is not None else f"at least {low}"
        raise ApiError(400, f"{key} must be {bound}, got {value}", key)
    return value


def _bool(body: dict[str, Any], key: str) -> bool:
    value = body.get(key, False)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise ApiError(400, f"{key} must be true or false", key)
    return value


def _token_ids(value: list[Any]) -> list[int]:
    if not value or not all(isinstance(t, int) and not isinstance(t, bool) for t in value):
        raise ApiError(400, "prompt must be text or a non-empty list of token ids", "prompt")
    return value


def _prompt(value: Any) -> tuple[list[int] | None, str | None]:
    if isinstance(value, str):
        return None, value
    if isinstance(value, list) and value and isinstance(value[0], list | str):
        if len(value) != 1:
            raise ApiError(400, "only one prompt per request is supported", "prompt")
        value = value[0]
        if isinstance(value, str):
            return None, value
    if isinstance(value, list):
        return _token_ids(value), None
    raise ApiError(400, "prompt must be text or a list of token ids", "prompt")


def render_chat(messages: Any) -> str:
    """A chat request's messages, checked, in the simulator's chat template
    (engines/model/tokens.py `chat_prompt`)."""
    if not isinstance(messages, list) or not messages:
        raise ApiError(400, "messages must be a non-empty list", "messages")
    turns = []
    for message in messages:
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise ApiError(400, "each message needs a role and a content", "messages")
        content = message.get("content") or ""
        if isinstance(content, list):
            if not all(isinstance(p, dict) and p.get("type") == "text" for p in content):
                raise ApiError(400, "only text content parts are supported", "messages")
            content = "".join(str(p.get("text", "")) for p in content)
        if not isinstance(content, str):
            raise ApiError(400, "message content must be text", "messages")
        turns.append((message["role"], content))
    return chat_prompt(turns)


def parse(kind: Kind, body: Any, served_model: str) -> GenRequest:
    """A request body, checked; ApiError names the bad field."""
    if not isinstance(body, dict):
        raise ApiError(400, "the request body must be a JSON object")
    model = body.get("model")
    if model is not None and model != served_model:
        raise ApiError(404, f"The model `{model}` does not exist.", "model")
    if _int(body, "n", 1, 1) not in (None, 1):
        raise ApiError(400, "n must be 1", "n")
    if kind == "completion":
        if "prompt" not in body:
            raise ApiError(400, "prompt is required", "prompt")
        ids, text = _prompt(body["prompt"])
        raw = body.get("logprobs")
        logprobs = None if raw is False else _int(body, "logprobs", 0, MAX_TOP_LOGPROBS)
        max_tokens = _int(body, "max_tokens", 1)
    else:
        ids, text = None, render_chat(body.get("messages"))
        top = _int(body, "top_logprobs", 0, MAX_TOP_LOGPROBS)
        logprobs = (top or 0) if _bool(body, "logprobs") else None
        max_tokens = _int(body, "max_completion_tokens", 1) or _int(body, "max_tokens", 1)
    temperature = body.get("temperature", 1.0)
    if temperature is None:
        temperature = 1.0
    if isinstance(temperature, bool) or not isinstance(temperature, int | float):
        raise ApiError(400, "temperature must be a number", "temperature")
    if temperature < 0:
        raise ApiError(400, "temperature must be at least 0", "temperature")
    options = body.get("stream_options") or {}
    if not isinstance(options, dict):
        raise ApiError(400, "stream_options must be an object", "stream_options")
    return GenRequest(
        kind=kind,
        prompt_ids=ids,
        prompt_text=text,
        max_tokens=max_tokens,
        ignore_eos=_bool(body, "ignore_eos"),
        temperature=float(temperature),
        seed=_int(body, "seed", -(2**63), 2**63 - 1),
        logprobs=logprobs,
        stream=_bool(body, "stream"),
        include_usage=_bool(options, "include_usage"),
        bootstrap=_bootstrap(body),
    )


def _bootstrap(body: dict[str, Any]) -> Bootstrap | None:
    room = body.get("bootstrap_room")
    if room is None:
        return None
    host, port = body.get("bootstrap_host"), body.get("bootstrap_port")
    if not isinstance(host, str) or isinstance(port, bool) or not isinstance(port, int):
        raise ApiError(400, "bootstrap_room needs bootstrap_host and bootstrap_port")
    if isinstance(room, bool) or not isinstance(room, int):
        raise ApiError(400, "bootstrap_room must be an integer", "bootstrap_room")
    return Bootstrap(host, port, room)


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


class Render:
    """Bodies and chunks of one answer. Chunk text is spliced into a prefix and suffix built
    once per request: the hot path of a streamed answer encodes only the new text."""

    def __init__(
        self,
        req: GenRequest,
        request_id: str,
        model: str,
        created: int,
        fingerprint: str,
        tokenizer: Tokenizer,
        answer: Answer,
    ) -> None:
        self.req = req
        self.tokenizer = tokenizer
        self.answer = answer
        self._offset = 0
        head = {"id": request_id, "object": "", "created": created, "model": model}
        head["system_fingerprint"] = fingerprint
        self.head = head
        chunk = {**head, "object": _CHUNK_OBJECT[req.kind]}
        opening = _dumps(chunk)[:-1] + ',"choices":[{"index":0,'
        self._prefix = "data: " + opening + ('"text":' if req.kind == "completion" else "")
        if req.kind == "chat":
            self._prefix += '"delta":{"content":'
        close = "" if req.kind == "completion" else "}"
        stop_reason = ',"stop_reason":null' if req.kind == "completion" else ""
        self._close = close
        self._ending = f"{stop_reason}}}]}}\n\n"
        # most chunks: no logprobs, no finish reason; only the text between these changes
        self._plain_prefix = self._prefix + '" '  # every token's text starts with a space
        self._plain_suffix = f'"{close},"logprobs":null,"finish_reason":null{self._ending}'

    def _text(self, start: int, stop: int) -> str:
        text = self.tokenizer.text
        if stop == start + 1:
            return text(self.answer.token(start))
        return "".join(text(t) for t in self.answer.tokens(start, stop))

    def chunk(self, start: int, stop: int, finish_reason: str | None) -> bytes:
        """One SSE event carrying the tokens at positions start..stop-1."""
        if finish_reason is None and self.req.logprobs is None and stop == start + 1:
            # one token, whose text needs no JSON escaping (Tokenizer): splice, no encoder
            word = self.tokenizer.word(self.answer.token(start))
            return (self._plain_prefix + word + self._plain_suffix).encode()
        text = json.dumps(self._text(start, stop))  # a plain string: C encoder, no separators
        logprobs = "null" if self.req.logprobs is None else _dumps(self._logprobs(start, stop))
        reason = "null" if finish_reason is None else f'"{finish_reason}"'
        return (
            f'{self._prefix}{text}{self._close},"logprobs":{logprobs},"finish_reason":{reason}'
            f"{self._ending}"
        ).encode()

    def role_chunk(self) -> bytes:
        """The first chunk of a streamed chat answer: the assistant's role, no text yet."""
        body = {
            **self.head,
            "object": "chat.completion.chunk",
            "choices": [
                {
                    "index": 0,
                    "delta": {"role": "assistant", "content": ""},
                    "logprobs": None,
                    "finish_reason": None,
                }
            ],
        }
        return f"data: {_dumps(body)}\n\n".encode()

    def usage_chunk(self, prompt_tokens: int, completion_tokens: int) -> bytes:
        body = {
            **self.head,
            "object": _CHUNK_OBJECT[self.req.kind],
            "choices": [],
            "usage": usage(prompt_tokens, completion_tokens),
        }
        return f"data: {_dumps(body)}\n\n".encode()

    def full(self, count: int, finish_reason: str, prompt_tokens: int) -> dict[str, Any]:
        """The body of an answer that is not streamed."""
        text = self._text(0, count)
        logprobs = None if self.req.logprobs is None else self._logprobs(0, count)
        choice: dict[str, Any] = {"index": 0}
        if self.req.kind == "completion":
            choice |= {"text": text, "logprobs": logprobs, "finish_reason": finish_reason}
            choice["stop_reason"] = None
        else:
            choice |= {"message": {"role": "assistant", "content": text}, "logprobs": logprobs}
            choice["finish_reason"] = finish_reason
        obj = "text_completion" if self.req.kind == "completion" else "chat.completion"
        return {
            **self.head,
            "object": obj,
            "choices": [choice],
            "usage": usage(prompt_tokens, count),
        }

    def _logprobs(self, start: int, stop: int) -> dict[str, Any]:
        k = self.req.logprobs or 0
        text = self.tokenizer.text
        tops = [self.answer.top(i, max(k, 1)) for i in range(start, stop)]
        if self.req.kind == "chat":
            return {
                "content": [
                    {
                        "token": text(top[0][0]),
                        "logprob": top[0][1],
                        "bytes": list(text(top[0][0]).encode()),
                        "top_logprobs": [
                            {"token": text(t), "logprob": lp, "bytes": list(text(t).encode())}
                            for t, lp in top[:k]
                        ],
                    }
                    for top in tops
                ]
            }
        offsets = []
        for top in tops:
            offsets.append(self._offset)
            self._offset += len(text(top[0][0]))
        return {
            "tokens": [text(top[0][0]) for top in tops],
            "token_logprobs": [top[0][1] for top in tops],
            "top_logprobs": [{text(t): lp for t, lp in top} for top in tops],
            "text_offset": offsets,
        }


_CHUNK_OBJECT: dict[Kind, str] = {"completion": "text_completion", "chat": "chat.completion.chunk"}


def usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
