"""`denv bench`, `bench get`, `fleet list`, `offers` and `recipe` as a user runs them."""

from __future__ import annotations

import json
import os
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


def test_get_row_of_the_last_ranking(denv) -> None:  # type: ignore[no-untyped-def]
    first = json.loads(denv("bench", "--rank", "throughput", "--json").stdout)["ranked"][0]
    run = denv("bench", "get", "1", "--json")
    assert run.returncode == 0, run.stderr
    details = json.loads(run.stdout)
    assert details["result"] == first["result"]
    assert details["throughput"]["output_tok_s_per_gpu"] == first["output_tok_s_per_gpu"]
    assert details["source"]["kind"] == "published" and details["source"]["url"]
    assert details["cost"]["price_source"]
    text = denv("bench", "get", first["result"])
    assert text.returncode == 0 and first["result"] in text.stdout and "cost" in text.stdout


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


def test_recipe_fit_names_what_is_missing(denv) -> None:  # type: ignore[no-untyped-def]
    wide = json.loads(
        denv("recipe", "fit", "llama-3.1-8b/vllm@1", "--fleet", "gb200-rack", "--json").stdout
    )
    assert wide["fits"] is False and "is for" in wide["reasons"][0]
    ok = denv("recipe", "fit", "llama-3.1-8b/vllm@1", "--fleet", "local")
    assert ok.returncode == 0 and "fits local" in ok.stdout
