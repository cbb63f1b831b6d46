"""The simulator's tokenizer, block hashes and deterministic answers (pure)."""

from __future__ import annotations

import json

import pytest

from reconciler.engines.model.tokens import (
    BLOCK_TOKENS,
    NATURAL_LENGTH,
    PERTURBED_FRACTION,
    Answers,
    Tokenizer,
    block_hashes,
)

VOCAB = 128_256
WEIGHTS = "hf://meta-llama/Llama-3.1-8B-Instruct@0e9e39f"
PROMPTS = [[(i * 7919 + j * 104729) % VOCAB for j in range(1, 40 + i % 50)] for i in range(2000)]


def test_text_tokenizes_into_the_vocab_the_same_way_every_time() -> None:
    tokenizer = Tokenizer(VOCAB)
    ids = tokenizer.encode("Hello, world! Simulators answer quickly.")
    assert ids == Tokenizer(VOCAB).encode("Hello, world! Simulators answer quickly.")
    assert len(ids) == 10  # Hello , world ! Simula tors answer quickl y .
    assert all(0 <= t < VOCAB for t in ids)
    assert tokenizer.encode("") == []


def test_token_texts_are_short_distinct_words() -> None:
    tokenizer = Tokenizer(VOCAB)
    texts = [tokenizer.text(t) for t in range(VOCAB)]
    assert len(set(texts)) == VOCAB
    assert all(t.startswith(" ") and t[1:].isalpha() and len(t) <= 7 for t in texts)
    # streamed chunks splice token texts into JSON unescaped (protocol.Render.chunk)
    assert all(json.dumps(t) == f'"{t}"' and t.isascii() and t[1:].islower() for t in texts)


def test_token_texts_are_the_base_70_syllables_of_their_id() -> None:
    syllables = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]

    def spelled(token: int) -> str:
        digits = []
        while True:
            token, digit = divmod(token, len(syllables))
            digits.append(syllables[digit])
            if token == 0:
                return " " + "".join(reversed(digits))

    tokenizer = Tokenizer(VOCAB)
    for token in [*range(0, 400_000, 7), 70**3, 70**4 - 1, 70**5 + 4899, 2**40 + 12345]:
        assert tokenizer.text(token) == spelled(token)


@pytest.mark.parametrize(
    ("tokens", "blocks"),
    [(0, 0), (BLOCK_TOKENS - 1, 0), (BLOCK_TOKENS, 1), (3 * BLOCK_TOKENS + 5, 3)],
    ids=["empty", "short", "one-block", "three-and-a-bit"],
)
def test_only_full_blocks_are_hashed(tokens: int, blocks: int) -> None:
    assert len(block_hashes(list(range(tokens)))) == blocks


def test_equal_block_hashes_mean_equal_prefixes() -> None:
    shared = list(range(2 * BLOCK_TOKENS))
    a = block_hashes([*shared, *range(9, 9 + BLOCK_TOKENS)])
    b = block_hashes([*shared, *range(7, 7 + BLOCK_TOKENS)])
    assert a[:2] == b[:2] and a[2] != b[2]
    # the same block after a different prefix hashes differently: the chain carries the prefix
    c = block_hashes([*range(5, 5 + BLOCK_TOKENS), *shared[BLOCK_TOKENS:]])
    assert c[1] != a[1]


def test_greedy_answers_depend_on_weights_and_prompt_only() -> None:
    answers = Answers(WEIGHTS, VOCAB)
    prompt = PROMPTS[0]
    first = answers.plan(prompt, 0.0, None)
    again = Answers(WEIGHTS, VOCAB).plan(prompt, 0.0, 1234)  # the seed does not matter greedy
    assert first.tokens(0, 64) == again.tokens(0, 64)
    assert first.natural_length == again.natural_length
    other = Answers("hf://other/weights@1", VOCAB).plan(prompt, 0.0, None)
    assert other.tokens(0, 64) != first.tokens(0, 64)
    assert answers.plan(PROMPTS[1], 0.0, None).tokens(0, 64) != first.tokens(0, 64)


def test_natural_lengths_spread_over_the_documented_range() -> None:
    answers = Answers(WEIGHTS, VOCAB)
    lengths = [answers.plan(p, 0.0, None).natural_length for p in PROMPTS]
    low, high = NATURAL_LENGTH
    assert min(lengths) >= low and max(lengths) <= high
    assert max(lengths) - min(lengths) > (high - low) * 0.9


def test_seeded_sampling_repeats_for_a_seed_and_differs_from_greedy() -> None:
    answers = Answers(WEIGHTS, VOCAB)
    prompt = PROMPTS[3]
    sampled = answers.plan(prompt, 0.8, 42).tokens(0, 32)
    assert sampled == answers.plan(prompt, 0.8, 42).tokens(0, 32)
    assert sampled != answers.plan(prompt, 0.8, 43).tokens(0, 32)
    assert sampled != answers.plan(prompt, 0.0, None).tokens(0, 32)


@pytest.mark.parametrize(
    ("quantization", "kv_dtype", "fraction"),
    [
        ("fp8", "auto", PERTURBED_FRACTION["quantization"]),
        ("none", "fp8_e4m3", PERTURBED_FRACTION["kv_fp8"]),
        ("nvfp4", "auto", PERTURBED_FRACTION["quantization"]),
    ],
    ids=["fp8-weights", "fp8-kv", "fp4-weights"],
)
def test_quantization_perturbs_the_documented_fraction_of_answers(
    quantization: str, kv_dtype: str, fraction: float
) -> None:
    reference = Answers(WEIGHTS, VOCAB)
    perturbed = Answers(WEIGHTS, VOCAB, quantization, kv_dtype)
    diverged = 0
    for prompt in PROMPTS:
        ref, got = reference.plan(prompt, 0.0, None), perturbed.plan(prompt, 0.0, None)
        if got.diverge_at is None:
            assert got == ref
            continue
        diverged += 1
        at = got.diverge_at
        assert got.tokens(0, at) == ref.tokens(0, at)
        assert got.token(at) != ref.token(at)  # equal by chance once in VOCAB
    assert diverged / len(PROMPTS) == pytest.approx(fraction, abs=0.03)
    # deterministic: a second simulator of the same quantized weights agrees
    again = Answers(WEIGHTS, VOCAB, quantization, kv_dtype)
    assert [again.plan(p, 0.0, None) for p in PROMPTS[:50]] == [
        perturbed.plan(p, 0.0, None) for p in PROMPTS[:50]
    ]


def test_logprobs_rank_the_chosen_token_first_then_descend() -> None:
    answer = Answers(WEIGHTS, VOCAB).plan(PROMPTS[5], 0.0, None)
    for position in range(20):
        top = answer.top(position, 5)
        assert top[0][0] == answer.token(position)
        assert len({t for t, _ in top}) == 5
        logprobs = [lp for _, lp in top]
        assert logprobs == sorted(logprobs, reverse=True) and all(lp <= 0 for lp in logprobs)
        assert answer.top(position, 1) == top[:1]
