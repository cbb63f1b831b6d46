from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from reconciler.catalog.latency import parse_latency_target
from reconciler.catalog.ranking import ErrorBand, RankBy, Ranking, rank
from reconciler.errors import UsageError
from reconciler.spec.result import Result
from tests.catalog.factories import PROFILES, offer, result

OFFERS = (offer("h200", 2.0), offer("b200", 3.0), offer("mi355x", 1.5))
ALIASES = {"gb200": "gb200-nvl72"}

# a: h200, meets the target at 16 and 64, misses at 256; b: b200, meets at 64;
# c: mi355x, misses everywhere; d: gaudi3, meets, no public price; e: h100, no TTFT p99.
FIELD = (
    result("a-16", hardware="h200", concurrency=16, ttft_p99_ms=300, tpot_p50_ms=10,
           output_tok_s=3000),
    result("a-64", hardware="h200", concurrency=64, ttft_p99_ms=900, tpot_p50_ms=20,
           output_tok_s=8000),
    result("a-256", hardware="h200", concurrency=256, ttft_p99_ms=2500, tpot_p50_ms=40,
           output_tok_s=12000),
    result("b-64", hardware="b200", engine="trt", version="1.2.0", concurrency=64,
           ttft_p99_ms=1000, tpot_p50_ms=25, output_tok_s=16000),
    result("c-32", hardware="mi355x", concurrency=32, ttft_p99_ms=1800, tpot_p50_ms=30,
           output_tok_s=6000),
    result("c-128", hardware="mi355x", concurrency=128, ttft_p99_ms=3000, tpot_p50_ms=60,
           output_tok_s=10000),
    result("d-32", hardware="gaudi3", engine="vllm", concurrency=32, ttft_p99_ms=1200,
           tpot_p50_ms=30, output_tok_s=4000),
    result("e-64", hardware="h100", concurrency=64, ttft_p99_ms=None, tpot_p50_ms=15,
           output_tok_s=2400),
)  # fmt: skip


def _rank(
    results: Sequence[Result] = FIELD,
    *,
    by: RankBy = "cost",
    target: str | None = "p99<1.5s",
    workload: str | None = "chat",
    prices: Mapping[str, float] | None = None,
    **filters: Any,
) -> Ranking:
    return rank(
        results,
        profiles=PROFILES,
        offers=OFFERS,
        hardware_aliases=ALIASES,
        workload=workload,
        target=parse_latency_target(target) if target else None,
        model=filters.get("model"),
        hardware=filters.get("hardware"),
        by=by,
        prices=prices or {},
        model_aliases=filters.get("model_aliases", {}),
    )


NO_PRICE = "no price for gaudi3 (give --price gaudi3=USD)"
C_MISS = "TTFT p99 1.8 s > 1.5 s"
E_MISSING = "no TTFT p99 in this result"


@pytest.mark.parametrize(
    ("by", "ranked", "missed"),
    [
        pytest.param(
            "cost",
            ["b-64", "a-64"],
            [("d-32", NO_PRICE), ("c-32", C_MISS), ("e-64", E_MISSING)],
            id="cost",
        ),
        pytest.param(
            "throughput",
            ["b-64", "a-64", "d-32"],
            [("c-32", C_MISS), ("e-64", E_MISSING)],
            id="throughput",
        ),
        pytest.param(
            "speed",
            ["a-16", "b-64", "d-32"],
            [("c-32", C_MISS), ("e-64", E_MISSING)],
            id="speed",
        ),
    ],
)
def test_order_and_misses(by: RankBy, ranked: list[str], missed: list[tuple[str, str]]) -> None:
    ranking = _rank(by=by)
    assert [row.result for row in ranking.ranked] == ranked
    assert [(row.result, row.reason) for row in ranking.missed] == missed
    assert all(row.reason is None for row in ranking.ranked)
    assert [row.result for row in ranking.rows] == ranked + [r for r, _ in missed]


def test_cost_figures_on_a_row() -> None:
    row = _rank().ranked[0]
    assert (row.result, row.gpus, row.gpu_hour) == ("b-64", 8, 3.0)
    assert row.usd_per_m_output == pytest.approx(8 * 3.0 / (16000 * 3600) * 1e6)
    assert row.output_tok_s_per_gpu == 2000
    assert row.ttft_p99_s == 1.0
    assert row.tok_s_per_user == 40
    assert row.engine == "trt 1.2.0"
    assert row.price_source == "semianalysis, as of 2026-07-31, https://example.org/prices"


def test_user_price_ranks_an_unpriced_configuration() -> None:
    ranking = _rank(prices={"gaudi3": 0.9})
    assert [row.result for row in ranking.ranked] == ["b-64", "d-32", "a-64"]
    assert ranking.ranked[1].price_source == "--price"


def test_no_target_ranks_every_configuration_at_its_best_point() -> None:
    ranking = _rank(target=None, by="throughput")
    assert [row.result for row in ranking.ranked] == ["b-64", "a-256", "c-128", "d-32", "e-64"]
    assert ranking.missed == ()


def test_batch_ignores_the_latency_target() -> None:
    ranking = _rank(workload="batch", target="p99<1ms", by="throughput")
    assert [row.result for row in ranking.ranked] == ["b-64", "a-256", "c-128", "d-32", "e-64"]


def test_missing_figure_only_when_no_point_has_figures() -> None:
    results = [
        result("x-1", concurrency=1, itl_p95_ms=None, ttft_p99_ms=100),
        result("x-2", concurrency=2, itl_p95_ms=80, ttft_p99_ms=200),
    ]
    ranking = _rank(results, target="p99<1s; itl:p95<50ms")
    assert [(r.result, r.reason) for r in ranking.missed] == [("x-2", "ITL p95 80 ms > 50 ms")]
    ranking = _rank(results[:1], target="p99<1s; itl:p95<50ms")
    assert [(r.result, r.reason) for r in ranking.missed] == [("x-1", "no ITL p95 in this result")]


def test_closest_miss_is_the_lowest_ratio_to_the_limit() -> None:
    results = [
        result("y-8", concurrency=8, ttft_p99_ms=1700, itl_p95_ms=20),
        result("y-4", concurrency=4, ttft_p99_ms=1000, itl_p95_ms=90),
    ]
    ranking = _rank(results, target="p99<1.5s; itl:p95<50ms")
    assert [(r.result, r.reason) for r in ranking.missed] == [("y-8", "TTFT p99 1.7 s > 1.5 s")]


@pytest.mark.parametrize(
    ("dates", "kept"),
    [
        pytest.param([dt.date(2026, 1, 1), dt.date(2026, 3, 1)], "new", id="newer-second"),
        pytest.param([dt.date(2026, 3, 1), dt.date(2026, 1, 1)], "old", id="newer-first"),
        pytest.param([None, dt.date(2025, 1, 1)], "new", id="undated-is-oldest"),
    ],
)
def test_dedupe_keeps_newest(dates: list[dt.date | None], kept: str) -> None:
    results = [
        result("old", at=dates[0], output_tok_s=9000),
        result("new", at=dates[1], output_tok_s=1000),
    ]
    ranking = _rank(results)
    assert [row.result for row in ranking.ranked] == [kept]


def test_points_of_other_kinds_or_versions_are_separate_configurations() -> None:
    results = [
        result("pub", kind="published"),
        result("sim", kind="simulated"),
        result("new-engine", version="0.5.10"),
    ]
    ranking = _rank(results)
    assert sorted((row.result, row.source) for row in ranking.ranked) == [
        ("new-engine", "published"),
        ("pub", "published"),
        ("sim", "simulated"),
    ]


def test_ties_break_by_result_id() -> None:
    results = [result("z", precision="fp4"), result("m", precision="fp8")]
    assert [row.result for row in _rank(results).ranked] == ["m", "z"]


DISAGG = {
    "mode": "disaggregated",
    "prefill": {"gpus": 4, "parallel": {"tp": 4}},
    "decode": {"gpus": 8, "parallel": {"tp": 8}},
}


def test_disaggregated_cost_counts_every_gpu() -> None:
    run = result("dis", gpus=None, topology=DISAGG, output_tok_s=1200, hardware="gb200")
    row = _rank([run], prices={"gb200": 2.0}).ranked[0]
    assert (row.gpus, row.hardware, row.output_tok_s_per_gpu) == (12, "gb200-nvl72", 100)
    assert row.usd_per_m_output == pytest.approx(5.5556, abs=5e-5)


def test_per_gpu_throughput_gives_output_tok_s() -> None:
    run = result("pg", gpus=12, output_tok_s=None, output_tok_s_per_gpu=100)
    row = _rank([run], prices={"h200": 2.0}).ranked[0]
    assert row.output_tok_s == 1200
    assert row.usd_per_m_output == pytest.approx(5.5556, abs=5e-5)


@pytest.mark.parametrize(
    ("prices", "usd", "source"),
    [
        pytest.param({}, 0.42, "InferenceX TCO", id="result-figure-stands"),
        pytest.param({"h200": 4.0}, 8 * 4.0 / (8000 * 3600) * 1e6, "--price", id="price-wins"),
    ],
)
def test_result_cost_unless_user_price(prices: dict[str, float], usd: float, source: str) -> None:
    run = result("own", usd_per_m_output=0.42, price=(1.41, "InferenceX TCO"))
    row = _rank([run], prices=prices).ranked[0]
    assert row.usd_per_m_output == pytest.approx(usd)
    assert row.price_source == source


@pytest.mark.parametrize(
    ("filters", "kept"),
    [
        pytest.param({"hardware": "H200"}, ["a-64"], id="hardware"),
        pytest.param({"hardware": "gb200-nvl72"}, ["g"], id="hardware-id-for-alias-result"),
        pytest.param({"model": "DeepSeek-R1"}, ["a-64", "g"], id="model-any-case"),
        pytest.param(
            {"model": "DeepSeek-R1-0528", "model_aliases": {"DeepSeek-R1-0528": "deepseek-r1"}},
            ["a-64", "g"],
            id="model-alias",
        ),
        pytest.param({"model": "llama-3.1-8b"}, [], id="no-model"),
    ],
)
def test_filters(filters: dict[str, Any], kept: list[str]) -> None:
    results = [*FIELD[:3], result("g", hardware="gb200", output_tok_s=1)]
    ranking = _rank(results, by="throughput", prices={"gb200": 1.0}, **filters)
    assert sorted(row.result for row in ranking.rows) == kept


@pytest.mark.parametrize(
    ("workload", "kept"),
    [
        pytest.param("chat", ["short"], id="chat"),
        pytest.param("agent", ["long-in"], id="agent"),
        pytest.param("reasoning", ["long-out"], id="reasoning"),
        pytest.param("batch", ["long-in", "long-out", "short"], id="batch"),
        pytest.param(None, ["long-in", "long-out", "short"], id="any"),
    ],
)
def test_workload_filter(workload: str | None, kept: list[str]) -> None:
    results = [
        result("short", isl=1024, osl=1024),
        result("long-in", isl=8192, osl=1024),
        result("long-out", isl=1024, osl=8192),
    ]
    ranking = _rank(results, workload=workload, target=None)
    assert sorted(row.result for row in ranking.rows) == kept


def test_unknown_workload() -> None:
    with pytest.raises(UsageError, match="unknown workload 'chit'"):
        _rank(workload="chit")


def test_row_json_names() -> None:
    row = next(r for r in _rank().missed if r.result == "c-32").model_dump(mode="json")
    assert {
        "result", "model", "hardware", "recipe", "engine", "gpus", "concurrency", "ttft_p99_s",
        "output_tok_s", "output_tok_s_per_gpu", "usd_per_m_output", "gpu_hour", "price_source",
        "source", "url", "reason",
    } <= set(row)  # fmt: skip
    assert row["reason"] == C_MISS


# Simulated rows: llama on h200 for agent and rag (both 8k in / 1k out), and a simulated row
# of recipe ds/sglang@1 on h200 for agent that a published result of the same recipe covers.
BAND = ErrorBand(
    lo_pct=-8.0, hi_pct=6.5, metric="tok/s/GPU", basis="h200, 17 points", extrapolated=False
)
SIMULATED = (
    result("sim-llama-agent", model="llama-3.1-8b", recipe="llama/vllm@1", workload="agent",
           kind="simulated", isl=8000, osl=1000, output_tok_s=20000, ttft_p99_ms=400),
    result("sim-llama-rag", model="llama-3.1-8b", recipe="llama/vllm@1", workload="rag",
           kind="simulated", isl=4096, osl=512, output_tok_s=30000, ttft_p99_ms=300),
    result("sim-ds-agent", recipe="ds/sglang@1", workload="agent", kind="simulated",
           isl=8000, osl=1000, output_tok_s=90000, ttft_p99_ms=100),
    result("pub-ds-8k", recipe="ds/sglang@1", isl=8192, osl=1024, output_tok_s=5000,
           ttft_p99_ms=900),
)  # fmt: skip


@pytest.mark.parametrize(
    ("workload", "ranked"),
    [
        pytest.param("agent", ["sim-llama-agent", "pub-ds-8k"], id="agent"),
        pytest.param("rag", ["sim-llama-rag", "pub-ds-8k"], id="rag"),
    ],
)
def test_simulated_rows_count_for_their_own_workload_only(workload: str, ranked: list[str]) -> None:
    """A simulated rag row is not an agent row though its lengths fall in both; the published
    8k/1k row counts for both by its lengths; the simulated row its recipe, hardware and
    workload share with a published one is left out."""
    ranking = _rank(SIMULATED, workload=workload, by="throughput")
    assert [r.result for r in ranking.rows] == ranked


def test_simulated_rows_keep_their_label_and_band() -> None:
    bands = {"sim-llama-agent": BAND}
    ranking = rank(
        SIMULATED,
        profiles=PROFILES,
        offers=OFFERS,
        hardware_aliases=ALIASES,
        workload="agent",
        target=None,
        model=None,
        hardware=None,
        by="throughput",
        prices={},
        bands=bands,
    )
    sim, pub = ranking.ranked
    assert (sim.source, sim.band, sim.url) == ("simulated", BAND, None)
    assert (pub.source, pub.band) == ("published", None)
    assert sim.model_dump(mode="json")["band"]["lo_pct"] == -8.0 and BAND.text == "-8…+6%"


def test_published_row_wins_where_both_exist_on_an_alias() -> None:
    """The published row names the hardware by an alias; it still covers the simulated one."""
    pub = result("pub-gb", hardware="gb200", recipe="ds/sglang@1", isl=8192, osl=1024)
    sim = result("sim-gb", hardware="gb200-nvl72", recipe="ds/sglang@1", workload="agent",
                 kind="simulated", isl=8000, osl=1000)  # fmt: skip
    ranking = _rank((pub, sim), workload="agent", target=None, by="throughput")
    assert [r.result for r in ranking.rows] == ["pub-gb"]
