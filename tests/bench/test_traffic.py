"""Traffic shapes: the Mooncake format read with errors that name file, line and field; the
canonical form and its digest; the standard workloads' generators; a trace's figures; and
`denv traffic generate|stats` as a user runs them."""

from __future__ import annotations

import functools
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from reconciler.bench.traffic import (
    BLOCK_TOKENS,
    WORKLOADS,
    TraceLine,
    generate,
    read_trace,
    trace_digest,
    trace_stats,
    write_trace,
)
from reconciler.engines.model.traffic import parse_traffic
from reconciler.errors import SpecError, UsageError
from reconciler.spec.workload import WorkloadProfile, WorkloadsFile

ROOT = Path(__file__).resolve().parents[2]


@functools.cache
def profiles() -> dict[str, WorkloadProfile]:
    data = YAML(typ="safe").load((ROOT / "catalog/workloads.yaml").read_text())
    return {p.id: p for p in WorkloadsFile.model_validate(data).workloads}


def line(stamp: int, tokens: int, out: int, ids: list[int]) -> TraceLine:
    return TraceLine(timestamp=stamp, input_length=tokens, output_length=out, hash_ids=ids)


# -- reading and writing ------------------------------------------------------------------


def test_a_mooncake_line_reads_and_writes_back_the_same() -> None:
    text = (
        '{"timestamp": 1200, "input_length": 1830, "output_length": 212,'
        ' "hash_ids": [17, 18, 901, 4]}\n'
    )
    (read,) = parse_traffic(text, "shape.jsonl")
    assert read == line(1200, 1830, 212, [17, 18, 901, 4])
    assert trace_digest([read]) == trace_digest(parse_traffic(text.replace(" ", ""), "other"))


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (
            '{"timestamp": 0, "input_length": 100}',
            "shape.jsonl:2:1: output_length: missing required field",
        ),
        (
            '{"timestamp": -5, "input_length": 1, "output_length": 1, "hash_ids": [0]}',
            "shape.jsonl:2:2: timestamp: Input should be greater than or equal to 0",
        ),
        (
            '{"timestamp": 0, "input_length": 0, "output_length": 1, "hash_ids": []}',
            "shape.jsonl:2:18: input_length: Input should be greater than 0",
        ),
        (
            '{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": ["a"]}',
            "shape.jsonl:2:57: hash_ids[0]: Input should be a valid integer",
        ),
        (
            '{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [0], "text": "x"}',
            "shape.jsonl:2:74: text: unknown field",
        ),
        (
            '{"timestamp": 0, "input_length": 1025, "output_length": 1, "hash_ids": [0, 1]}',
            "shape.jsonl:2:60: hash_ids: 2 block ids for input_length 1025; expected 3",
        ),
        ('{"timestamp": 0,', "shape.jsonl:2:17: not JSON"),
        ("[1, 2]", "shape.jsonl:2:1: a trace line must be a JSON object"),
    ],
    ids=[
        "missing",
        "negative-time",
        "zero-input",
        "bad-id",
        "unknown-field",
        "block-count",
        "not-json",
        "not-object",
    ],
)
def test_bad_lines_are_named_by_file_line_and_field(raw: str, message: str) -> None:
    good = '{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [0]}'
    with pytest.raises(SpecError) as refused:
        parse_traffic(f"{good}\n{raw}\n{good}\n", "shape.jsonl")
    assert str(refused.value).startswith(message)


def test_every_bad_line_is_reported_at_once() -> None:
    with pytest.raises(SpecError) as refused:
        parse_traffic("{}\n\nnope\n", "t.jsonl")
    lines = [p.line for p in refused.value.problems]
    assert sorted(set(lines)) == [1, 3]


def test_an_empty_or_missing_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="no requests"):
        parse_traffic("\n\n", "empty.jsonl")
    with pytest.raises(Exception, match="no such traffic file"):
        read_trace(tmp_path / "absent.jsonl")


def test_lines_come_back_in_arrival_order_and_round_trip_through_a_file(tmp_path: Path) -> None:
    lines = [line(900, 10, 1, [0]), line(100, 600, 2, [1, 2]), line(100, 5, 3, [3])]
    write_trace(lines, tmp_path / "t.jsonl")
    read = read_trace(tmp_path / "t.jsonl")
    assert [(x.timestamp, x.output_length) for x in read] == [(100, 2), (100, 3), (900, 1)]
    assert (tmp_path / "t.jsonl").read_text().splitlines()[0] == (
        '{"timestamp":900,"input_length":10,"output_length":1,"hash_ids":[0]}'
    )


# -- generators ---------------------------------------------------------------------------


@pytest.mark.parametrize("workload", [*WORKLOADS, "reasoning"])
def test_generators_repeat_per_seed_and_keep_the_block_rule(workload: str) -> None:
    rate = None if workload == "batch" else 5.0
    first = generate(workload, 300, seed=7, rate=rate, profiles=profiles())
    assert trace_digest(first) == trace_digest(
        generate(workload, 300, 7, rate, profiles=profiles())
    )
    assert trace_digest(first) != trace_digest(
        generate(workload, 300, 8, rate, profiles=profiles())
    )
    profile = profiles()[workload]
    for x in first:
        assert len(x.hash_ids) == math.ceil(x.input_length / BLOCK_TOKENS)
        assert profile.input_tokens.contains(x.input_length)
        assert profile.output_tokens.contains(x.output_length)
    parse_traffic("\n".join(json.dumps(x.model_dump()) for x in first), "again")  # valid


@pytest.mark.parametrize(
    ("workload", "input_mean", "output_mean", "reuse"),
    [
        ("chat", (480, 540), (240, 270), (0.0, 0.0)),
        ("rag", (4000, 4200), (490, 530), (0.05, 0.2)),
        ("agent", (7000, 9500), (950, 1050), (0.7, 0.9)),
        ("coding", (14000, 20000), (450, 750), (0.6, 0.9)),
    ],
)
def test_generated_figures_match_the_profiles(
    workload: str,
    input_mean: tuple[float, float],
    output_mean: tuple[float, float],
    reuse: tuple[float, float],
) -> None:
    stats = trace_stats(generate(workload, 2000, seed=1, rate=10.0, profiles=profiles()))
    assert input_mean[0] <= stats.input.mean <= input_mean[1]
    assert output_mean[0] <= stats.output.mean <= output_mean[1]
    assert reuse[0] <= stats.prefix_reuse <= reuse[1]
    assert stats.rate_rps is not None and 9.0 < stats.rate_rps < 11.0
    assert stats.burstiness is not None and 0.9 < stats.burstiness < 1.1  # Poisson: CV 1


def test_agent_sessions_share_the_system_prompt_and_every_earlier_turn() -> None:
    lines = generate("agent", 400, seed=3, rate=2.0, profiles=profiles())
    system = lines[0].hash_ids[: 4096 // BLOCK_TOKENS]
    assert all(x.hash_ids[: len(system)] == system for x in lines)
    # A later turn repeats the full blocks of its session's previous prompt, and grows.
    by_prefix = {}
    turns = 0
    for x in lines:
        for earlier in by_prefix.values():
            full = earlier.input_length // BLOCK_TOKENS
            if full > len(system) and x.hash_ids[:full] == earlier.hash_ids[:full]:
                assert x.input_length > earlier.input_length + earlier.output_length
                turns += 1
                break
        by_prefix[tuple(x.hash_ids)] = x
    assert turns > 200
    # Blocks past the shared ones are new ids: ids are names of distinct prefixes.
    firsts: dict[int, tuple[int, ...]] = {}
    for x in lines:
        for i, block in enumerate(x.hash_ids):
            assert firsts.setdefault(block, tuple(x.hash_ids[:i])) == tuple(x.hash_ids[:i])


def test_batch_sends_everything_at_once_and_a_rate_changes_times_only() -> None:
    batch = generate("batch", 50, seed=2, profiles=profiles())
    assert {x.timestamp for x in batch} == {0}
    slow = generate("chat", 200, seed=2, rate=1.0, profiles=profiles())
    fast = generate("chat", 200, seed=2, rate=100.0, profiles=profiles())
    assert [x.input_length for x in slow] == [x.input_length for x in fast]
    assert slow[-1].timestamp > 50 * fast[-1].timestamp


@pytest.mark.parametrize(
    ("workload", "requests", "rate", "message"),
    [
        ("nope", 10, None, "unknown workload 'nope'"),
        ("chat", 0, None, "requests must be at least 1"),
        ("chat", 10, -1.0, "rate must be a positive number"),
        ("batch", 10, 2.0, "sends every request at once"),
    ],
)
def test_bad_generator_arguments_are_refused(
    workload: str, requests: int, rate: float | None, message: str
) -> None:
    with pytest.raises(UsageError, match=message):
        generate(workload, requests, rate=rate, profiles=profiles())


# -- figures ------------------------------------------------------------------------------


def test_stats_of_a_small_trace_are_exact() -> None:
    lines = [
        line(0, 1024, 10, [0, 1]),
        line(1000, 1536, 20, [0, 1, 2]),
        line(2000, 512, 30, [5]),
        line(4000, 100, 40, [0]),
    ]
    stats = trace_stats(lines)
    assert stats.requests == 4 and stats.duration_s == 4.0
    assert stats.rate_rps == pytest.approx(0.75)  # 3 gaps over 4 s
    assert stats.burstiness == pytest.approx(math.sqrt(2 / 9) / (4 / 3))  # gaps 1, 1, 2
    assert (stats.input.p50, stats.input.min, stats.input.max) == (768.0, 100, 1536)
    assert stats.output.p90 == pytest.approx(37.0)
    assert (stats.blocks, stats.unique_blocks) == (7, 4)
    assert stats.prefix_reuse == pytest.approx(3 / 7)


# -- the CLI ------------------------------------------------------------------------------


def denv(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "reconciler", *args]
    return subprocess.run(argv, capture_output=True, text=True, cwd=cwd, timeout=60)


def test_generate_then_stats_from_the_command_line(tmp_path: Path) -> None:
    out = tmp_path / "rag.jsonl"
    made = denv(
        "traffic",
        "generate",
        "--workload",
        "rag",
        "--requests",
        "200",
        "--rate",
        "4",
        "--seed",
        "5",
        "--out",
        str(out),
        "--json",
    )
    assert made.returncode == 0, made.stderr
    described = json.loads(made.stdout)
    assert described["stats"]["requests"] == 200
    assert described["digest"] == trace_digest(read_trace(out))
    shown = denv("traffic", "stats", str(out))
    assert shown.returncode == 0, shown.stderr
    assert "prefix reuse" in shown.stdout and described["digest"] in shown.stdout


def test_a_bad_trace_exits_1_naming_the_line_without_a_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"timestamp": 0, "input_length": 600, "output_length": 1, "hash_ids": [0]}\n')
    shown = denv("traffic", "stats", str(bad))
    assert shown.returncode == 1
    assert f"{bad}:1:" in shown.stderr and "hash_ids" in shown.stderr
    assert "Traceback" not in shown.stderr
