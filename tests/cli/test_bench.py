"""`denv bench`, `bench get`, `fleet list`, `offers` and `recipe` as a user runs them."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

ROW_FIELDS = {
    "result",
    "model",
    "hardware",
    "recipe",
    "ttft_p99_s",
    "output_tok_s",
    "output_tok_s_per_gpu",
    "usd_per_m_output",
    "source",
    "reason",
}


@pytest.fixture
def denv(tmp_path: Path):  # type: ignore[no-untyped-def]
    env = {
        **os.environ,
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "DENV_HOME": str(tmp_path / "denv-home"),
    }

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "reconciler", *args],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env=env,
            timeout=120,
        )

    return run


def test_ranking_json_shape_and_order(denv) -> None:  # type: ignore[no-untyped-def]
    run = denv("bench", "--workload", "agent", "--latency", "p99<1.5s", "--json")
    assert run.returncode == 0, run.stderr
    ranking = json.loads(run.stdout)
    assert set(ranking) == {"ranked", "missed"}
    assert ranking["ranked"] and ranking["missed"]
    for row in ranking["ranked"]:
        assert set(row) >= ROW_FIELDS and row["reason"] is None
        assert row["ttft_p99_s"] <= 1.5
    costs = [row["usd_per_m_output"] for row in ranking["ranked"]]
    assert costs == sorted(costs)
    assert all(row["reason"] for row in ranking["missed"])


def _ranked(denv, workload: str, *extra: str) -> list[dict[str, object]]:  # type: ignore[no-untyped-def]
    run = denv("bench", "--workload", workload, "--latency", "p99<1.5s", *extra, "--json")
    assert run.returncode == 0, run.stderr
    rows: list[dict[str, object]] = json.loads(run.stdout)["ranked"]
    return rows


def test_agent_rag_and_coding_rank_different_lists_of_several_models(denv) -> None:  # type: ignore[no-untyped-def]
    lists = {w: _ranked(denv, w) for w in ("agent", "rag", "coding")}
    ids = {w: [row["result"] for row in rows] for w, rows in lists.items()}
    assert ids["agent"] != ids["rag"] and ids["agent"] != ids["coding"]
    assert ids["rag"] != ids["coding"]
    for rows in lists.values():
        assert len({row["model"] for row in rows}) >= 3
        assert {row["source"] for row in rows} == {"published", "simulated"}


def test_simulated_rows_carry_label_and_band(denv) -> None:  # type: ignore[no-untyped-def]
    rows = _ranked(denv, "chat")
    simulated = [row for row in rows if row["source"] == "simulated"]
    assert simulated and all(row["url"] is None for row in simulated)
    for row in simulated:
        band = row["band"]
        assert isinstance(band, dict) and band["metric"] == "tok/s/GPU"
        assert band["lo_pct"] < 0 < band["hi_pct"] and band["basis"]
    assert all(row["band"] is None for row in rows if row["source"] == "published")
    text = denv("bench", "--workload", "chat", "--latency", "p99<1.5s", "--limit", "200")
    assert text.returncode == 0, text.stderr
    assert re.search(r"simulated -\d+…\+\d+%", text.stdout) and "80% interval" in text.stdout
    assert "not measured" in text.stdout


def test_get_row_of_the_last_ranking(denv) -> None:  # type: ignore[no-untyped-def]
    ranked = json.loads(denv("bench", "--rank", "throughput", "--json").stdout)["ranked"]
    number, first = next((n, r) for n, r in enumerate(ranked, 1) if r["source"] == "published")
    run = denv("bench", "get", str(number), "--json")
    assert run.returncode == 0, run.stderr
    details = json.loads(run.stdout)
    assert details["result"] == first["result"]
    assert details["throughput"]["output_tok_s_per_gpu"] == first["output_tok_s_per_gpu"]
    assert details["source"]["kind"] == "published" and details["source"]["url"]
    assert details["cost"]["price_source"]
    text = denv("bench", "get", first["result"])
    assert text.returncode == 0 and first["result"] in text.stdout and "cost" in text.stdout


H200_RESULT = "ix-deepseek-r1-h200-sglang-fp8-1024-1024-416664c3-c64-2025-12-10"


def test_get_shows_the_roofline(denv) -> None:  # type: ignore[no-untyped-def]
    run = denv("bench", "get", H200_RESULT, "--json")
    assert run.returncode == 0, run.stderr
    roofline = json.loads(run.stdout)["roofline"]
    assert roofline["hardware"] == "h200" and roofline["gpus"] == 8
    assert 0 < roofline["decode"]["fraction"] < 1 and 0 < roofline["prefill"]["fraction"] < 1
    assert roofline["prefill"]["peak_format"] == "fp8"
    decode = round(roofline["decode"]["fraction"] * 100)
    text = denv("bench", "get", H200_RESULT)
    assert text.returncode == 0, text.stderr
    assert f"decode {decode}% of HBM bandwidth (4.8 TB/s)" in text.stdout
    assert "of fp8 compute (1979 TFLOPS)" in text.stdout


def test_the_roofline_example_of_the_docs_runs_as_printed(tmp_path: Path) -> None:
    """docs/benchmarks.md's sh blocks (the Roofline example), run as printed with `denv` on
    PATH, print exactly the output block that follows them."""
    from scripts.walk_guides import parse

    text = (ROOT / "docs/benchmarks.md").read_text()
    blocks = parse(text, "docs/benchmarks.md")
    assert blocks and all(b.output for b in blocks)
    shim = tmp_path / "bin" / "denv"
    shim.parent.mkdir()
    shim.write_text(f'#!/bin/sh\nexec {sys.executable} -m reconciler "$@"\n')
    shim.chmod(0o755)
    env = {**os.environ, "PATH": f"{shim.parent}{os.pathsep}{os.environ['PATH']}"}
    env.update(PYTHONPATH=str(ROOT), XDG_STATE_HOME=str(tmp_path / "state"))
    lines = text.splitlines()
    for block in blocks:
        [command] = block.commands
        run = subprocess.run(
            ["bash", "-c", command.text], cwd=ROOT, env=env, capture_output=True, text=True
        )
        assert run.returncode == command.expect, f"{command.where}: {run.stderr}"
        assert block.output is not None
        start, end, _ = block.output
        printed = "\n".join(lines[start + 1 : end])
        shown = "\n".join(line.rstrip() for line in run.stdout.strip("\n").splitlines())
        assert shown == printed, f"{command.where} prints otherwise"


def test_price_override_reprices(denv) -> None:  # type: ignore[no-untyped-def]
    base = json.loads(denv("bench", "--hardware", "h200", "--json").stdout)["ranked"][0]
    run = denv("bench", "--hardware", "h200", "--price", "h200=10", "--json")
    priced = next(r for r in json.loads(run.stdout)["ranked"] if r["result"] == base["result"])
    assert priced["gpu_hour"] == 10 and priced["price_source"] == "--price"
    assert priced["usd_per_m_output"] == pytest.approx(
        base["usd_per_m_output"] * 10 / base["gpu_hour"]
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["bench", "--latency", "p99<1.5parsecs"], "p99<1.5parsecs"),
        (["bench", "--price", "h200=cheap"], "h200=cheap"),
        (["bench", "get", "99999"], "not in the last ranking"),
        (["bench", "get", "no-such-result"], "no result 'no-such-result'"),
        (["offers", "--hardware", "h900"], "unknown hardware 'h900'"),
        (["recipe", "show", "llama-3.1-8b/vllm@9"], "unknown recipe"),
    ],
)
def test_bad_input_is_a_message_exit_1(denv, args: list[str], message: str) -> None:  # type: ignore[no-untyped-def]
    denv("bench", "--json")
    run = denv(*args)
    assert run.returncode == 1, (run.stdout, run.stderr)
    assert message in run.stderr and "Traceback" not in run.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["bench"],
        ["bench", "run", "--recipe", "llama-3.1-8b/vllm@1", "--target", "local"],
        ["sim", "predict", "--recipe", "llama-3.1-8b/vllm@1"],
        ["traffic", "generate", "--out", "unused.jsonl"],
    ],
)
def test_every_command_refuses_an_unknown_workload_alike(denv, args: list[str]) -> None:  # type: ignore[no-untyped-def]
    """One check (catalog/workloads.py: profile_for): the same message, exit 1, no usage text."""
    run = denv(*args, "--workload", "agnet")
    assert run.returncode == 1, (run.stdout, run.stderr)
    assert run.stderr.strip() == (
        "unknown workload 'agnet' (known: chat, agent, rag, coding, reasoning, batch)"
    )
    assert not (ROOT / "unused.jsonl").exists()


def test_fleet_list_declared_figures(denv) -> None:  # type: ignore[no-untyped-def]
    run = denv("fleet", "list", "--probe", "none", "--json")
    fleets = {f["fleet"]: f for f in json.loads(run.stdout)["fleets"]}
    local = fleets["local"]
    # 16 GPUs, 8 kept for trials, chat-8b asks 2 × 1 GPU in each of its two stages
    assert (local["gpus"], local["trial_gpus"], local["free_gpus"]) == (16, 8, 4)
    assert local["figures"] == "declared" and local["units"] is None
    assert fleets["gb200-rack"]["domain"] == 72


def test_offers_cheapest_first(denv) -> None:  # type: ignore[no-untyped-def]
    offers = json.loads(denv("offers", "--hardware", "gb200", "--json").stdout)
    prices = [o["gpu_hour"] for o in offers["offers"]]
    assert offers["hardware"] == "gb200-nvl72" and prices == sorted(prices) and prices


def test_offers_label_modelled_tco_apart_from_list_prices(denv) -> None:  # type: ignore[no-untyped-def]
    run = denv("offers", "--hardware", "h200")
    assert run.returncode == 0, run.stderr
    text = " ".join(run.stdout.split())
    listed, modelled = text.split("modelled TCO, not a quote")
    assert "public list prices" in listed and "none for h200" in listed
    assert "SemiAnalysis TCO: hyperscaler" in modelled and "2026-07-31" in modelled
    assert "https://github.com/SemiAnalysisAI/InferenceX-app" in modelled
    offers = json.loads(denv("offers", "--hardware", "h200", "--json").stdout)
    assert "not a quote" in offers["kinds"]["modelled_tco"]
    assert {o["kind"] for o in offers["offers"]} == {"modelled_tco"}
    assert all(o["source"]["url"] and o["as_of"] for o in offers["offers"])


def test_offers_show_a_list_price_with_its_source_and_date(denv, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "catalog").mkdir()
    (tmp_path / "catalog" / "hardware.yaml").write_text(
        (ROOT / "catalog" / "hardware.yaml").read_text()
    )
    (tmp_path / "catalog" / "offers.yaml").write_text(
        "offers:\n"
        "  - {hardware: h200, kind: list_price, provider: Example Cloud, gpu_hour: 3.5,\n"
        "     as_of: 2026-11-01, source: {url: 'https://cloud.example/pricing'}}\n"
        "  - {hardware: h200, kind: modelled_tco, provider: 'SemiAnalysis TCO: neocloud',\n"
        "     tier: neocloud, gpu_hour: 1.59, as_of: 2026-07-31,\n"
        "     source: {url: 'https://example.org/tco'}}\n"
    )
    run = denv("offers", "--hardware", "h200", "--repo", str(tmp_path))
    assert run.returncode == 0, run.stderr
    listed, modelled = " ".join(run.stdout.split()).split("modelled TCO, not a quote")
    assert "Example Cloud" in listed and "3.50 2026-11-01 https://cloud.example/pricing" in listed
    assert "Example Cloud" not in modelled and "1.59" in modelled
    offers = json.loads(
        denv("offers", "--hardware", "h200", "--repo", str(tmp_path), "--json").stdout
    )
    kinds = [(o["provider"], o["kind"]) for o in offers["offers"]]
    assert kinds == [
        ("SemiAnalysis TCO: neocloud", "modelled_tco"),
        ("Example Cloud", "list_price"),
    ]


def test_recipe_fit_names_what_is_missing(denv) -> None:  # type: ignore[no-untyped-def]
    wide = json.loads(
        denv("recipe", "fit", "llama-3.1-8b/vllm@1", "--fleet", "gb200-rack", "--json").stdout
    )
    assert wide["fits"] is False and "is for" in wide["reasons"][0]
    ok = denv("recipe", "fit", "llama-3.1-8b/vllm@1", "--fleet", "local")
    assert ok.returncode == 0 and "fits local" in ok.stdout


def test_ranking_reads_only_the_catalog_and_results(denv, denv_repo: Path) -> None:  # type: ignore[no-untyped-def]
    """A fleet or recipe being edited does not stop a ranking (it reads neither); validate
    still names the broken file."""
    shutil.copytree(ROOT / "results", denv_repo / "results")
    (denv_repo / "fleets" / "local.yaml").write_text("kind: [unclosed\n")
    recipe = next((denv_repo / "recipes").glob("*/*.yaml"))
    recipe.write_text(recipe.read_text() + "\nnot_a_field: 1\n")
    ranked = denv("bench", "--repo", str(denv_repo), "--json")
    assert ranked.returncode == 0, ranked.stderr
    assert json.loads(ranked.stdout)["ranked"]
    checked = denv("validate", str(denv_repo))
    assert checked.returncode == 1
    assert "fleets/local.yaml" in checked.stdout + checked.stderr
    assert str(recipe.relative_to(denv_repo)) in checked.stdout + checked.stderr


def test_compare_takes_the_row_numbers_that_get_takes(denv) -> None:  # type: ignore[no-untyped-def]
    """One way to name a result (cli/bench.py: _find_result) for `get` and `compare`."""
    assert denv("bench", "--workload", "chat", "--json").returncode == 0
    ids = [json.loads(denv("bench", "get", n, "--json").stdout)["result"] for n in ("1", "2")]
    run = denv("bench", "compare", "1", "2", "--json")
    assert run.returncode == 0, run.stderr
    comparison = json.loads(run.stdout)
    assert [comparison["a"], comparison["b"]] == ids


def _published(tmp_path: Path, name: str, tok_s: float) -> Path:
    line = (ROOT / "results/published/inferencex.jsonl").read_text().splitlines()[0]
    result = json.loads(line)
    result["id"] = name
    result["metrics"] = {"output_tok_s": tok_s, "output_tok_s_per_gpu": tok_s / 8}
    result["gpus"], result["usd_per_m_output"] = 8, None
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(result))
    return path


def test_compare_names_no_better_side_within_the_noise(denv, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    a = _published(tmp_path, "a", 10_000.0)
    close, far = _published(tmp_path, "close", 10_000.4), _published(tmp_path, "far", 11_000.0)
    figures = {
        f["name"]: f
        for f in json.loads(denv("bench", "compare", str(a), str(close), "--json").stdout)[
            "figures"
        ]
    }
    assert figures["output tok/s"]["better"] == "unclear"
    assert figures["output tok/s"]["noise_pct"] == 2.0
    text = denv("bench", "compare", str(a), str(close)).stdout
    assert "no clear difference" in text and "±2% run-to-run noise" in text
    clear = json.loads(denv("bench", "compare", str(a), str(far), "--json").stdout)
    assert {f["name"]: f["better"] for f in clear["figures"]}["output tok/s"] == "b"


def test_compare_of_simulated_results_uses_their_error_band(denv) -> None:  # type: ignore[no-untyped-def]
    rows = json.loads(denv("bench", "--workload", "agent", "--hardware", "h200", "--json").stdout)
    sims = [r for r in rows["ranked"] if r["source"] == "simulated"][:2]
    run = denv("bench", "compare", sims[0]["result"], sims[1]["result"], "--json")
    comparison = json.loads(run.stdout)
    tok = {f["name"]: f for f in comparison["figures"]}["output tok/s/GPU"]
    assert tok["noise_pct"] > 2.0 and "simulated" in comparison["a_uncertainty"]
    assert (tok["better"] == "unclear") == (abs(tok["delta_pct"]) <= tok["noise_pct"])


@pytest.mark.parametrize(
    ("rank", "column", "descending"),
    [("cost", "$/M-OUT", False), ("throughput", "TOK/S/GPU", True), ("speed", "TOK/S/USER", True)],
)
def test_the_table_shows_the_figure_it_ranks_by(
    denv, rank: str, column: str, descending: bool
) -> None:  # type: ignore[no-untyped-def]
    run = denv("bench", "--workload", "chat", "--rank", rank, "--limit", "8")
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0].strip().endswith(f"ranked by {rank} ({column})")
    header = re.split(r"\s{2,}", lines[1].strip())
    rows = [re.split(r"\s{2,}", line.strip()) for line in lines[2:10]]
    values = [float(row[header.index(column)].strip("$").replace(",", "")) for row in rows]
    assert len(values) == 8 and values == sorted(values, reverse=descending)


def test_one_gpu_is_one_gpu_not_one_gpus(denv) -> None:  # type: ignore[no-untyped-def]
    """One pluralising rule (spec/words.py: counted) for every count of GPUs shown."""
    fit = denv("recipe", "fit", "llama-3.1-8b/vllm@1", "--fleet", "local").stdout
    assert "fits local: 1 GPU, each replica" in fit
    denv("bench", "--workload", "agent", "--model", "llama-3.1-8b", "--hardware", "h200", "--json")
    got = denv("bench", "get", "1").stdout
    assert "tok/s on 1 GPU = " in got and "topology 1 × 1 GPU (" in got
    assert "1 GPUs" not in fit + got


@pytest.mark.parametrize("command", [["bench", "get"], ["sim", "predict"], ["status"], ["ui"]])
def test_help_shows_flags_as_taking_no_value(denv, command: list[str]) -> None:  # type: ignore[no-untyped-def]
    """One rule for every command (cli/__init__.py: flags_without_values): `--json`, not
    `--json <bool>`."""
    run = denv(*command, "--help")
    assert run.returncode == 0, run.stderr
    assert "--json" in run.stdout and "<bool>" not in run.stdout


def test_bench_and_sim_predict_give_the_same_interval_for_the_same_pair(denv) -> None:  # type: ignore[no-untyped-def]
    """One source (engines/model/error_intervals.py for_prediction), one confidence level (80%):
    the ranking's band is sim predict's interval in percent of the figure."""
    ranking = denv(
        "bench", "--workload", "agent", "--model", "llama-3.1-8b", "--hardware", "h100", "--json"
    )
    row = next(
        r
        for r in json.loads(ranking.stdout)["ranked"]
        if r["recipe"] == "llama-3.1-8b/vllm@1" and r["source"] == "simulated"
    )
    run = denv(
        "sim", "predict", "--recipe", "llama-3.1-8b/vllm@1", "--hardware", "h100",
        "--workload", "agent", "--concurrency", str(row["concurrency"]), "--json",
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    predicted = json.loads(run.stdout)
    figure = predicted["output_tok_s_per_gpu"]
    interval = predicted["expected_error"]["output_tok_s_per_gpu"]
    assert row["band"]["lo_pct"] == pytest.approx((interval["lo"] / figure - 1) * 100, abs=0.1)
    assert row["band"]["hi_pct"] == pytest.approx((interval["hi"] / figure - 1) * 100, abs=0.1)


def test_sim_predict_says_which_hardware_it_chose_and_why(denv) -> None:  # type: ignore[no-untyped-def]
    run = denv("sim", "predict", "--recipe", "llama-3.1-8b/vllm@1", "--isl", "64", "--osl", "8")
    assert run.returncode == 0, run.stderr
    assert "hardware h100: the recipe's first of h100, h200, b200 (--hardware" in run.stdout
    assert "80% intervals (the measured figure falls inside 8 times in 10" in run.stdout
