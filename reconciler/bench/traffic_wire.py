"""Pure logic: what the recording proxy reads from OpenAI-compatible traffic — which requests
become trace lines, the body sent upstream (asking for usage in streams when the client did
not), how a server-sent-event stream splits into events, and where the usage figures are.
Nothing here keeps prompt or answer text: it is parsed, looked at and dropped."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

Kind = Literal["completion", "chat"]
GENERATION_PATHS: dict[str, Kind] = {
    "/v1/completions": "completion",
    "/v1/chat/completions": "chat",
}
# chat request fields vLLM's /tokenize takes as well, so it applies the same template
_CHAT_TEMPLATE_FIELDS = (
    "add_generation_prompt",
    "continue_final_message",
    "add_special_tokens",
    "chat_template",
    "chat_template_kwargs",
    "tools",
)
_EVENT_ENDS = (b"\r\n\r\n", b"\n\n", b"\r\r")


@dataclass(frozen=True)
class Intent:
    """What the proxy does with one request besides passing it on."""

    body: bytes  # what goes upstream: the client's bytes unless usage was asked for
    kind: Kind | None = None  # None: pass through, record nothing
    skip: str | None = None  # why a generation request is not recorded (no content in it)
    strip_usage: bool = False  # the recorder asked for the usage chunk: the client never sees it
    prompt_ids: list[int] | None = None  # the prompt, when it came as token ids
    tokenize: dict[str, Any] | None = None  # the body for upstream's /tokenize, for text


def _token_ids(value: Any) -> list[int] | None:
    if isinstance(value, list) and value and all(type(t) is int for t in value):
        return value
    return None


def _completion_prompt(body: dict[str, Any]) -> tuple[list[int] | None, dict[str, Any] | None]:
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str | list):
        prompt = prompt[0]  # a batch of one
    if isinstance(prompt, str):
        ask = {"prompt": prompt, "add_special_tokens": body.get("add_special_tokens", True)}
        return None, {"model": body.get("model"), **ask}
    return _token_ids(prompt), None


def _chat_tokenize(body: dict[str, Any]) -> dict[str, Any] | None:
    if not isinstance(body.get("messages"), list):
        return None
    extra = {key: body[key] for key in _CHAT_TEMPLATE_FIELDS if key in body}
    return {"model": body.get("model"), "messages": body["messages"], **extra}


def intent(path: str, raw: bytes) -> Intent:
    """How to forward and record one request to `path` with body `raw`."""
    kind = GENERATION_PATHS.get(path)
    if kind is None:
        return Intent(raw)
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return Intent(raw, kind, skip="body is not JSON")
    if not isinstance(body, dict):
        return Intent(raw, kind, skip="body is not a JSON object")
    if body.get("n") not in (None, 1) or body.get("best_of") not in (None, 1):
        return Intent(raw, kind, skip="several answers per request (n > 1)")
    if kind == "completion":
        ids, tokenize = _completion_prompt(body)
    else:
        ids, tokenize = None, _chat_tokenize(body)
    if ids is None and tokenize is None:
        return Intent(raw, kind, skip="prompt is not one text or one token-id list")
    strip = False
    if body.get("stream") is True:
        options = body.get("stream_options")
        options = options if isinstance(options, dict) else {}
        if options.get("include_usage") is not True:
            body = {**body, "stream_options": {**options, "include_usage": True}}
            raw, strip = json.dumps(body).encode(), True
    return Intent(raw, kind, strip_usage=strip, prompt_ids=ids, tokenize=tokenize)


class EventSplitter:
    """Server-sent events out of a byte stream cut anywhere; each event keeps its bytes,
    blank line included, so the events joined are the stream unchanged."""

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, data: bytes) -> list[bytes]:
        self._buffer += data
        events: list[bytes] = []
        while True:
            ends = [(at, len(end)) for end in _EVENT_ENDS if (at := self._buffer.find(end)) >= 0]
            if not ends:
                return events
            at, size = min(ends)
            events.append(self._buffer[: at + size])
            self._buffer = self._buffer[at + size :]

    def rest(self) -> bytes:
        """Bytes after the last complete event (a stream that ended mid-event)."""
        rest, self._buffer = self._buffer, b""
        return rest


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int
    completion_tokens: int


def _usage(value: Any) -> Usage | None:
    if not isinstance(value, dict):
        return None
    prompt, completion = value.get("prompt_tokens"), value.get("completion_tokens")
    if type(prompt) is int and type(completion) is int:
        return Usage(prompt, completion)
    return None


def body_usage(raw: bytes) -> Usage | None:
    """The usage of a whole (not streamed) answer."""
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    return _usage(body.get("usage")) if isinstance(body, dict) else None


def event_usage(event: bytes) -> tuple[Usage | None, bool]:
    """The usage an event carries, and whether the event is the usage-only chunk (no
    choices) that `stream_options.include_usage` adds before `[DONE]`."""
    if b'"usage"' not in event:  # most chunks: no JSON parse on the hot path
        return None, False
    data = b"".join(
        line[5:].lstrip(b" ") for line in event.splitlines() if line.startswith(b"data:")
    )
    try:
        chunk = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return None, False
    if not isinstance(chunk, dict):
        return None, False
    usage = _usage(chunk.get("usage"))
    return usage, usage is not None and chunk.get("choices") == []
