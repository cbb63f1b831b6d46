"""A recorded prompt's hash ids: chained block hashes, named by small integers in order of
first sight, cut or padded to the engine's own token count."""

from __future__ import annotations

from reconciler.bench.traffic_blocks import BlockNames, prompt_block_hashes, recorded_line

SYSTEM = list(range(1000, 2024))  # two full blocks every prompt starts with


def test_equal_hashes_mean_equal_prefixes() -> None:
    a = prompt_block_hashes([*SYSTEM, *range(300)])
    b = prompt_block_hashes([*SYSTEM, *range(300), 9])
    c = prompt_block_hashes([*reversed(SYSTEM[:512]), *SYSTEM[512:], *range(300)])
    assert len(a) == 3 and len(b) == 3
    assert a[:2] == b[:2] and a[2] != b[2]  # the partial last block differs
    assert c[1] != a[1]  # same tokens in block 1, different block 0: a different prefix
    assert prompt_block_hashes([]) == []


def test_names_are_sequential_and_stable_within_a_file() -> None:
    names = BlockNames()
    first = recorded_line(0, [*SYSTEM, *range(10)], 1034, 5, names)
    second = recorded_line(40, [*SYSTEM, *range(20)], 1044, 5, names)
    assert first.hash_ids == [0, 1, 2] and second.hash_ids == [0, 1, 3]
    assert (second.timestamp, second.input_length, second.output_length) == (40, 1044, 5)


def test_the_engine_count_wins_over_the_tokenizer_call() -> None:
    names = BlockNames()
    longer = recorded_line(0, SYSTEM, 1030, 1, names)  # a template added 6 tokens
    assert longer.hash_ids == [0, 1, 2] and longer.input_length == 1030
    shorter = recorded_line(0, SYSTEM, 500, 1, names)
    assert shorter.hash_ids == [0]
    unknown = recorded_line(0, None, 1025, 1, names)  # no token ids: shares nothing
    assert unknown.hash_ids == [3, 4, 5]
