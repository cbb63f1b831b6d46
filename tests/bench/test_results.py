"""results.py: a sweep's levels become result files under results/, which the repository
loader reads and `denv bench` ranks; `denv bench compare` puts two side by side."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from reconciler.bench.metrics import LevelMetrics, level_metrics
from reconciler.bench.records import RequestRecord
from reconciler.bench.results import RunInfo, build_result, read_result, result_path, write_result
from reconciler.bench.sweep import run_sweep
from reconciler.bench.traffic import TraceLine, trace_digest
from reconciler.errors import DenvError
from reconciler.spec.result import Load
from tests.conftest import ROOT
from tests.engines.sim.sims import sim_process, sim_spec

TRACE = [
    TraceLine(timestamp=i * 50, input_length=600 + i, output_length=20, hash_ids=[1, 50 + i])
    for i in range(30)
]


def run_info(**update: object) -> RunInfo:
    fields: dict[str, object] = {
        "recipe": "llama-3.1-8b/vllm@1",
        "recipe_digest": "sha256:abc123",
        "model": "llama-3.1-8b",
        "engine": "vllm",
        "engine_version": "0.11.0",
        "hardware": "h200",
        "gpus": 1,
        "simulated": True,
        "driver": "sim",
        "gpu_names": ["NVIDIA H200 (simulated)"],
        "workload": "chat",
        "traffic_digest": trace_digest(TRACE),
        "gpu_hour": 3.8,
        "price_source": "fleet local",
        "at": dt.datetime(2026, 11, 30, 12, 0, 0, tzinfo=dt.UTC),
        "prompt": "token_ids",
    }
    return RunInfo.model_validate({**fields, **update})


def a_level(concurrency: int = 4) -> LevelMetrics:
    records = [
        RequestRecord(
            index=i,
            sent_s=i * 0.1,
            chunks_s=(i * 0.1 + 0.05, i * 0.1 + 0.07),
            done_s=i * 0.1 + 0.07,
            input_length=600,
            output_length=2,
            output_tokens=2,
        )
        for i in range(10)
    ]
    return level_metrics(records, Load(concurrency=concurrency), gpus=1)


def test_a_result_names_everything_the_design_asks_for() -> None:
    level = a_level()
    result = build_result(level, run_info(), TRACE)
    assert result.id == "llama-3.1-8b-vllm-1-h200-c4-20261130t120000"
    assert result.recipe.id == "llama-3.1-8b/vllm@1" and result.recipe.digest == "sha256:abc123"
    assert (result.engine.name, result.engine.version) == ("vllm", "0.11.0")
    assert result.gpus == 1 and result.load.concurrency == 4
    assert result.workload.name == "chat" and result.workload.traffic_digest == trace_digest(TRACE)
    assert (result.workload.isl, result.workload.osl) == (
        614,
        20,
    )  # the lines' mean lengths (614.5)
    assert result.price is not None and result.price.source == "fleet local"
    assert result.metrics == level.metrics
    assert level.metrics.output_tok_s is not None
    expected = 1 * 3.8 / (level.metrics.output_tok_s * 3600) * 1e6  # GPUs × $/h ÷ tok/h
    assert result.usd_per_m_output == pytest.approx(expected, rel=1e-3)
    assert result.source.kind == "simulated" and result.source.at == dt.date(2026, 11, 30)
    assert result.environment.gpu_names == ["NVIDIA H200 (simulated)"]
    assert result.source.notes is not None and "warm-up" in result.source.notes


def test_measured_on_real_gpus_and_a_traffic_file_by_digest_only() -> None:
    result = build_result(a_level(), run_info(simulated=False, workload=None), TRACE)
    assert result.source.kind == "measured"
    assert result.workload.name is None and result.workload.isl is None
    assert result.workload.traffic_digest == trace_digest(TRACE)


def test_written_under_results_and_read_back(tmp_path: Path) -> None:
    result = build_result(a_level(), run_info(), TRACE)
    path = write_result(tmp_path, result)
    assert path == result_path(tmp_path, result)
    assert path.relative_to(tmp_path).parts[:4] == ("results", "llama-3.1-8b", "vllm@1", "h200")
    assert read_result(path) == result
    assert not list(path.parent.glob("*.partial"))


def test_a_bad_result_file_names_itself(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"id": "x", "model": "m"}))
    with pytest.raises(DenvError, match=r"bad\.json: not a valid result: engine: Field required"):
        read_result(bad)
    with pytest.raises(DenvError, match="no such result file"):
        read_result(tmp_path / "missing.json")


def denv(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "XDG_STATE_HOME": str(repo / ".state")}
    return subprocess.run(
        [sys.executable, "-m", "reconciler", *args, "--repo", str(repo)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
    )


def test_a_sweep_on_the_simulator_writes_results_that_bench_ranks(
    denv_repo: Path, tmp_path: Path
) -> None:
    with sim_process(sim_spec(time_scale=10.0), tmp_path) as sim:
        levels = run_sweep(sim.url, "llama-3.1-8b", TRACE, [1, 4], gpus=1, requests=30)
    paths = [write_result(denv_repo, build_result(lv, run_info(), TRACE)) for lv in levels]
    ranked = denv(denv_repo, "bench", "--model", "llama-3.1-8b", "--workload", "chat", "--json")
    assert ranked.returncode == 0, ranked.stderr
    rows = json.loads(ranked.stdout)["ranked"]
    ours = [row for row in rows if row["source"] == "simulated"]
    assert len(ours) == 1  # one configuration: its best point ranks
    assert ours[0]["result"] in {p.stem for p in paths}
    compared = denv(denv_repo, "bench", "compare", str(paths[0]), paths[1].stem, "--json")
    assert compared.returncode == 0, compared.stderr
    comparison = json.loads(compared.stdout)
    figures = {f["name"]: f for f in comparison["figures"]}
    assert comparison["a"] == paths[0].stem and comparison["b"] == paths[1].stem
    tok = figures["output tok/s"]
    assert tok["delta"] == pytest.approx(tok["b"] - tok["a"], abs=1e-6)
    within = tok["noise_pct"] is not None and abs(tok["delta_pct"]) <= tok["noise_pct"]
    assert tok["better"] == ("unclear" if within else "b" if tok["b"] > tok["a"] else "a")
    settings = {s["name"]: (s["a"], s["b"]) for s in comparison["settings"]}
    assert settings["load"] == ("concurrency 1", "concurrency 4")
    text = denv(denv_repo, "bench", "compare", str(paths[0]), str(paths[1]))
    assert text.returncode == 0 and "TTFT p99" in text.stdout and "B − A" in text.stdout


def test_compare_refuses_an_unknown_result(denv_repo: Path) -> None:
    run = denv(denv_repo, "bench", "compare", "no-such-result", "nor-this")
    assert run.returncode == 1 and "no result 'no-such-result'" in run.stderr
    assert "Traceback" not in run.stderr
