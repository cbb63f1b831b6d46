"""Predictions: figures as the metric dictionary defines them, the levers' direction under
load, determinism, traffic files, and `denv sim predict` as a user runs it."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from reconciler.engines.model import traffic
from reconciler.engines.model.perf import PerfModel
from reconciler.engines.model.predict import predict, sim_spec
from reconciler.engines.model.stats import Prediction, percentile, weighted_percentile
from reconciler.errors import SpecError
from reconciler.spec.recipe import Recipe
from tests.conftest import ROOT
from tests.engines.model.perfspecs import hardware, model, recipe

JSON_KEYS = {
    "ttft_ms",
    "tpot_ms",
    "itl_ms",
    "output_tok_s",
    "output_tok_s_per_gpu",
    "total_tok_s_per_gpu",
}
DISAGG = {
    "mode": "disaggregated",
    "prefill": {"replicas": 1, "gpus": 4, "parallel": {"tp": 4}},
    "decode": {"replicas": 1, "gpus": 4, "parallel": {"tp": 4}},
}


def run(r: Recipe, requests: list[traffic.Request], concurrency: int | None = 16) -> Prediction:
    return predict(r, hardware(r.hardware[0]), model(r.model), requests, concurrency)


def fixed(isl: int = 1024, osl: int = 256, count: int = 200) -> list[traffic.Request]:
    return traffic.fixed(isl, osl, count, 0.8)


def test_prediction_is_deterministic_and_consistent() -> None:
    a = run(recipe(), fixed())
    assert a == run(recipe(), fixed())
    assert a.simulated and a.gpus == 4 and a.requests == 200 - 16 and a.warmup == 16
    assert a.output_tok_s_per_gpu == pytest.approx(a.output_tok_s / 4, rel=1e-3)
    assert a.total_tok_s_per_gpu > a.output_tok_s_per_gpu
    assert a.ttft_ms.p50 <= a.ttft_ms.p99 and a.tpot_ms.p50 <= a.tpot_ms.p99
    assert a.e2e_ms.p50 > a.ttft_ms.p50
    # TPOT is (E2E - TTFT) / (tokens - 1): between the ITL median and the E2E
    assert a.tpot_ms.p50 >= a.itl_ms.p50 * 0.9


def test_a_prediction_reads_as_a_result_s_metrics_goodput_only_when_asked() -> None:
    a = run(recipe(), fixed(count=60))
    metrics = a.metrics()
    assert (metrics.ttft_ms.p50, metrics.ttft_ms.p99) == (a.ttft_ms.p50, a.ttft_ms.p99)
    assert metrics.output_tok_s_per_gpu == a.output_tok_s_per_gpu
    assert (metrics.requests, metrics.errors) == (a.requests, a.errors)
    assert metrics.goodput_rps is None and a.goodput_rps is not None
    assert a.metrics(goodput=True).goodput_rps == a.goodput_rps


def test_one_client_sees_model_step_times() -> None:
    r = recipe()
    m = PerfModel.from_spec(sim_spec(r, hardware("h200"), model(r.model)))
    p = run(r, traffic.fixed(1000, 100, 20), concurrency=1)
    expected_ttft = m.request_overhead_s + m.prefill_time(1000)
    assert p.ttft_ms.p50 == pytest.approx(expected_ttft * 1000, rel=0.02)
    assert p.itl_ms.p50 == pytest.approx(m.decode_step_time(1, 1050) * 1000, rel=0.02)
    assert p.output_tok_s == pytest.approx(100 / (p.e2e_ms.p50 / 1000), rel=0.02)


def test_prefix_reuse_raises_throughput() -> None:
    unique = traffic.fixed(4096, 128, 300)
    shared = [traffic.Request(q.prompt, q.output, tuple(range(len(q.blocks)))) for q in unique]
    cold, warm = run(recipe(), unique, 32), run(recipe(), shared, 32)
    assert warm.output_tok_s > 1.3 * cold.output_tok_s
    assert warm.ttft_ms.p50 < cold.ttft_ms.p50


def test_workload_prefix_reuse_hits_the_cache() -> None:
    agent = traffic.workload(_profile("agent"), 100)
    assert all(len(q.blocks) == q.prompt // 512 for q in agent)
    assert all(q.blocks[:3] == (0, 1, 2) for q in agent)  # one shared prefix
    off = recipe(kv_cache={"prefix_caching": False})
    assert run(recipe(), agent).ttft_ms.p50 < run(off, agent).ttft_ms.p50


def test_larger_max_batch_raises_throughput_and_itl_until_kv_runs_out() -> None:
    requests = fixed(1024, 512, 600)
    by_batch = [run(recipe(max_batch=b), requests, 128) for b in (8, 32, 128)]
    tput = [p.output_tok_s for p in by_batch]
    itl = [p.itl_ms.p50 for p in by_batch]
    assert tput == sorted(tput) and tput[2] > 2 * tput[0]
    assert itl == sorted(itl)
    # with KV for about 40 requests, a cap above that buys nothing
    tight = {"memory_fraction": 0.285}
    capped = [run(recipe(max_batch=b, kv_cache=tight), requests, 128) for b in (32, 128, 512)]
    assert capped[1].output_tok_s == pytest.approx(capped[2].output_tok_s, rel=0.05)
    assert capped[1].output_tok_s < 1.6 * capped[0].output_tok_s


def test_disaggregation_adds_kv_transfer_to_ttft() -> None:
    disagg = recipe(topology=DISAGG)
    p = run(disagg, traffic.fixed(8000, 50, 12), concurrency=1)
    prefill = PerfModel.from_spec(
        sim_spec(disagg, hardware("h200"), model(disagg.model), "prefill")
    )
    floor = prefill.request_overhead_s + prefill.prefill_time(8000) + prefill.kv_transfer_s(8000)
    assert prefill.kv_transfer_s(8000) > 0.002
    assert p.ttft_ms.p50 / 1000 > floor
    assert p.gpus == 8  # prefill GPUs count


def test_open_loop_rate_saturates() -> None:
    base = fixed(1024, 256, 300)
    low = run(recipe(), traffic.poisson(base, 1.0), None)
    high = run(recipe(), traffic.poisson(base, 100.0), None)
    assert high.output_tok_s > 5 * low.output_tok_s
    assert high.ttft_ms.p50 > low.ttft_ms.p50


def test_requests_too_large_are_rejected_not_fatal() -> None:
    requests = [traffic.Request(200_000, 10, ()), *fixed(count=60)]
    p = run(recipe(), requests, 4)
    assert p.errors == 1 and p.requests == len(requests) - 4  # the first 4 are warm-up


def test_a_thousand_requests_predict_quickly() -> None:
    began = time.process_time()
    run(recipe(), traffic.fixed(1024, 1024, 1000, 0.8), 64)
    assert time.process_time() - began < 4.0  # about 1 s on one core


@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [([1.0, 2.0, 3.0, 4.0], 50, 2.5), ([5.0], 99, 5.0), ([1.0, 2.0, 3.0, 4.0], 99, 3.97)],
)
def test_percentile_interpolates_like_numpy(values: list[float], q: float, expected: float) -> None:
    assert percentile(values, q) == pytest.approx(expected)
    assert weighted_percentile([(v, 1) for v in values], q) == pytest.approx(expected)
    assert weighted_percentile([(v, 3) for v in values], 50) == pytest.approx(
        percentile([v for v in values for _ in range(3)], 50)
    )


GOOD = '{"timestamp": 0, "input_length": 10, "output_length": 5, "hash_ids": [0]}'


# The same reading as `denv bench` (engines/model/traffic.py): line, column and field.
@pytest.mark.parametrize(
    ("text", "where"),
    [
        (f"{GOOD}\n{{oops\n", "t.jsonl:2:"),
        ('{"timestamp": 0, "input_length": 10}\n', "t.jsonl:1:1: output_length"),
        ('\n{"timestamp": 0, "input_length": -1, "output_length": 5}\n', "t.jsonl:2:18: input"),
        (
            '{"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [1]}',
            "t.jsonl:1:59: hash_ids: 1 block ids",
        ),
        ("", "no requests"),
    ],
    ids=["bad-json", "missing-field", "negative", "block-count", "empty"],
)
def test_traffic_file_errors_name_the_line(text: str, where: str) -> None:
    with pytest.raises(SpecError, match=where):
        traffic.parse_traffic(text, "t.jsonl")


def test_trace_keeps_full_blocks_and_send_times() -> None:
    lines = traffic.parse_traffic(
        '{"timestamp": 1500, "input_length": 1100, "output_length": 5, "hash_ids": [7, 8, 9]}\n'
        '{"timestamp": 500, "input_length": 600, "output_length": 5, "hash_ids": [7, 10]}\n',
        "t.jsonl",
    )
    first, second = traffic.traced(lines)
    assert (first.at_s, first.blocks) == (0.5, (7,))
    assert (second.at_s, second.blocks) == (1.5, (7, 8))


# ---------------------------------------------------------------------------- the CLI
def denv(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "reconciler", "sim", "predict", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )


def test_cli_json_has_the_promised_keys_and_is_deterministic() -> None:
    args = ("--recipe", "llama-3.1-8b/vllm@1", "--isl", "512", "--osl", "128", "--json")
    first, second = denv(*args, "--concurrency", "8"), denv(*args, "--concurrency", "8")
    assert first.returncode == 0, first.stderr
    data: dict[str, Any] = json.loads(first.stdout)
    assert set(data) >= JSON_KEYS and data["simulated"] is True
    for key in ("ttft_ms", "tpot_ms", "itl_ms"):
        assert set(data[key]) == {"p50", "p99"}
    assert first.stdout == second.stdout
    # The 80% interval beside each figure, in the figure's unit, widened outside the family.
    error = data["expected_error"]
    for key in ("output_tok_s_per_gpu", "ttft_p50_ms", "tpot_p50_ms"):
        assert set(error[key]) == {"lo", "hi"} and 0 < error[key]["lo"] < error[key]["hi"]
    # No aggregated point on H100 (the recipe's first GPU): a fallback, and it says so.
    assert error["cell"].endswith("sglang, aggregated, ≤ 16 clients")
    assert error["fallback"].startswith("too few points in h100, ≤ 16 clients: 0 points")
    assert error["widened"] == [
        "dense model: calibrated on MoE only",
        "GQA attention: calibrated on MLA only",
        "vllm: calibrated on sglang only",
    ]
    assert error["points"] > 0 and error["basis"]


def test_cli_table_says_simulated(tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    trace.write_text(
        "\n".join(
            json.dumps(
                {"timestamp": i * 100, "input_length": 700, "output_length": 20}
                | {"hash_ids": [2 * i, 2 * i + 1]}
            )
            for i in range(60)
        )
    )
    run_ = denv("--recipe", "llama-3.1-8b/sglang@1", "--traffic", str(trace))
    assert run_.returncode == 0, run_.stderr
    assert "SIMULATED" in run_.stdout and "not measured on hardware" in run_.stdout
    assert "80% interval" in run_.stdout and "widened: dense model" in run_.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--isl", "10"), "give one of"),
        (("--isl", "10", "--osl", "10", "--workload", "chat"), "give one of"),
        (("--workload", "chat", "--rate", "1", "--concurrency", "2"), "not both"),
        (("--workload", "nope"), "unknown workload"),
        (("--workload", "chat", "--hardware", "tpu"), "unknown hardware"),
        (("--traffic", "/nonexistent.jsonl"), "no such traffic file"),
    ],
    ids=["isl-alone", "two-shapes", "rate-and-concurrency", "workload", "hardware", "file"],
)
def test_cli_usage_errors(args: tuple[str, ...], message: str) -> None:
    result = denv("--recipe", "llama-3.1-8b/vllm@1", *args)
    assert result.returncode == 1 and message in result.stderr


def _profile(name: str) -> Any:
    from ruamel.yaml import YAML

    from reconciler.spec.workload import WorkloadsFile

    data = YAML(typ="safe").load((ROOT / "catalog/workloads.yaml").read_text())
    return next(w for w in WorkloadsFile.model_validate(data).workloads if w.id == name)
