"""What the recording proxy reads from the wire: which requests it records, the body it sends
upstream, events split from a stream cut anywhere, and the usage figures."""

from __future__ import annotations

import json

import pytest

from reconciler.bench.traffic_wire import EventSplitter, Usage, body_usage, event_usage, intent


def raw(body: object) -> bytes:
    return json.dumps(body).encode()


@pytest.mark.parametrize(
    ("path", "body", "kind", "skip"),
    [
        ("/v1/models", None, None, None),
        ("/v1/completions", {"prompt": "hi", "n": 2}, "completion", "several answers"),
        ("/v1/completions", {"prompt": ["a", "b"]}, "completion", "prompt is not one"),
        ("/v1/completions", {"prompt": [[1, 2], [3]]}, "completion", "prompt is not one"),
        ("/v1/completions", [1], "completion", "body is not a JSON object"),
        ("/v1/chat/completions", {"messages": "hi"}, "chat", "prompt is not one"),
        ("/v1/completions", {"prompt": "hi"}, "completion", None),
        ("/v1/completions", {"prompt": [[5, 6]]}, "completion", None),
        ("/v1/chat/completions", {"messages": []}, "chat", None),
    ],
    ids=[
        "other-path",
        "n-2",
        "two-prompts",
        "two-id-lists",
        "not-object",
        "bad-messages",
        "text",
        "batch-of-one",
        "chat",
    ],
)
def test_what_is_recorded(path: str, body: object, kind: str | None, skip: str | None) -> None:
    sent = raw(body) if body is not None else b""
    plan = intent(path, sent)
    assert plan.kind == kind
    assert plan.skip == skip if skip is None else (plan.skip or "").startswith(skip)
    assert plan.body == sent  # not streamed: upstream gets the client's bytes


def test_token_ids_are_used_as_given_and_text_goes_to_tokenize() -> None:
    ids = intent("/v1/completions", raw({"model": "m", "prompt": [1, 2, 3]}))
    assert ids.prompt_ids == [1, 2, 3] and ids.tokenize is None
    text = intent("/v1/completions", raw({"model": "m", "prompt": "hello"}))
    assert text.tokenize == {"model": "m", "prompt": "hello", "add_special_tokens": True}
    chat = {"model": "m", "messages": [{"role": "user", "content": "x"}], "tools": [], "top_p": 1}
    assert intent("/v1/chat/completions", raw(chat)).tokenize == {
        "model": "m",
        "messages": chat["messages"],
        "tools": [],
    }


def test_usage_is_asked_for_only_when_the_client_did_not() -> None:
    asked = raw({"prompt": "x", "stream": True, "stream_options": {"include_usage": True}})
    plan = intent("/v1/completions", asked)
    assert plan.body == asked and not plan.strip_usage
    plan = intent("/v1/completions", raw({"prompt": "x", "stream": True, "stream_options": {}}))
    assert plan.strip_usage
    assert json.loads(plan.body)["stream_options"] == {"include_usage": True}
    assert json.loads(plan.body)["prompt"] == "x"


def test_events_split_from_any_cut_join_back_to_the_stream() -> None:
    stream = b'data: {"a":1}\n\ndata: {"b":2}\r\n\r\n: comment\n\ndata: [DONE]\n\n'
    for cut in range(1, len(stream)):
        splitter = EventSplitter()
        events = splitter.feed(stream[:cut]) + splitter.feed(stream[cut:])
        assert b"".join(events) == stream and len(events) == 4
        assert splitter.rest() == b""
    splitter = EventSplitter()
    assert splitter.feed(b'data: {"a":1}\n\ndata: {"tr') == [b'data: {"a":1}\n\n']
    assert splitter.rest() == b'data: {"tr'


@pytest.mark.parametrize(
    ("event", "usage", "usage_only"),
    [
        (b'data: {"choices":[{"text":"x"}]}\n\n', None, False),
        (b'data: {"choices":[{"text":"x"}],"usage":null}\n\n', None, False),
        (
            b'data: {"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":3}}\n\n',
            Usage(7, 3),
            True,
        ),
        (
            b'data: {"choices":[{"text":""}],'
            b'"usage":{"prompt_tokens":7,"completion_tokens":3}}\n\n',
            Usage(7, 3),
            False,
        ),
        (b"data: [DONE]\n\n", None, False),
        (b'data: {"usage"\n\n', None, False),
    ],
    ids=["chunk", "usage-null", "usage-chunk", "usage-on-a-chunk", "done", "broken"],
)
def test_usage_in_events(event: bytes, usage: Usage | None, usage_only: bool) -> None:
    assert event_usage(event) == (usage, usage_only)


def test_usage_of_a_whole_answer() -> None:
    assert body_usage(raw({"usage": {"prompt_tokens": 4, "completion_tokens": 2}})) == Usage(4, 2)
    assert body_usage(b"not json") is None
    assert body_usage(raw({"usage": {"prompt_tokens": "4"}})) is None
