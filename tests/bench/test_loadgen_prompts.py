"""prompts.py: prompts of exact length whose blocks follow the trace's hash ids."""

from __future__ import annotations

import json

import pytest

from reconciler.bench.prompts import (
    TOKEN_ID_LOW,
    TOKEN_ID_SPAN,
    WORDS,
    PromptBuilder,
    PromptFormat,
    simulator_chat_overhead,
)
from reconciler.bench.traffic import TraceLine
from reconciler.engines.model.tokens import Tokenizer
from reconciler.engines.sim.protocol import render_chat


def line(length: int, hash_ids: list[int]) -> TraceLine:
    return TraceLine(timestamp=0, input_length=length, output_length=1, hash_ids=hash_ids)


@pytest.mark.parametrize("form", ["token_ids", "text"])
@pytest.mark.parametrize("length", [1, 511, 512, 513, 1300])
def test_exact_length(form: PromptFormat, length: int) -> None:
    blocks = -(-length // 512)
    tokens = PromptBuilder(form).tokens(line(length, list(range(blocks))), 0)
    assert len(tokens) == length


def test_equal_ids_give_equal_blocks_and_others_differ() -> None:
    build = PromptBuilder("token_ids")
    a = build.tokens(line(1300, [5, 6, 7]), 0)
    b = build.tokens(line(1100, [5, 6, 9]), 1)
    c = build.tokens(line(1100, [4, 6, 9]), 2)
    assert a[:1024] == b[:1024]  # blocks 5 and 6 shared
    assert a[1024:1100] != b[1024:1100]
    assert a[:512] != c[:512]
    # a fresh builder (another run) makes the same blocks
    assert PromptBuilder("token_ids").tokens(line(1300, [5, 6, 7]), 0) == a


def test_blocks_past_the_hash_ids_are_the_requests_own() -> None:
    build = PromptBuilder("token_ids")
    first, second = (build.tokens(line(1024, [3]), index) for index in (0, 1))
    assert first[:512] == second[:512] and first[512:] != second[512:]


def test_token_ids_lie_in_every_catalog_vocabulary() -> None:
    value = json.loads(PromptBuilder("token_ids").json_value(line(2048, [1, 2, 3, 4]), 0))
    assert len(value) == 2048
    assert all(TOKEN_ID_LOW <= t < TOKEN_ID_LOW + TOKEN_ID_SPAN for t in value)


def test_every_word_is_one_distinct_simulator_token() -> None:
    tokenizer = Tokenizer(128256)
    ids = [tokenizer.encode(word) for word in WORDS]
    assert all(len(i) == 1 for i in ids)
    assert len({i[0] for i in ids}) == len(WORDS) == 256


def test_text_prompts_tokenize_to_their_length_on_the_simulator() -> None:
    text = json.loads(PromptBuilder("text").json_value(line(1300, [1, 2, 3]), 0))
    assert len(Tokenizer(128256).encode(text)) == 1300


def test_chat_overhead_is_the_simulators_template() -> None:
    overhead = simulator_chat_overhead()
    content = json.loads(PromptBuilder("text").json_value(line(700, [1, 2]), 0, 700 - overhead))
    rendered = render_chat([{"role": "user", "content": content}])
    assert len(Tokenizer(128256).encode(rendered)) == 700
