"""The roofline of a result: shares computed by hand for a dense and an MoE model, why a share
is missing, and every result in results/ giving finite shares, under 1 where published."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from reconciler.catalog.roofline import Roofline, result_roofline, roofline, summary
from reconciler.spec.loader import load_repo
from reconciler.spec.repo import Repo
from reconciler.spec.sources import WorkTree
from tests.catalog.factories import result
from tests.conftest import ROOT
from tests.engines.model.perfspecs import hardware, model

TP4 = {"mode": "aggregated", "gpus": 4, "parallel": {"tp": 4}}


def test_dense_model_by_hand() -> None:
    """Llama-3.1-70B in fp8 on 4 H200s (tp 4), 1000 in / 1000 out, 2000 output tok/s at a
    TPOT of 20 ms."""
    r = result(
        model="llama-3.1-70b",
        precision="fp8",
        gpus=4,
        topology=TP4,
        isl=1000,
        osl=1000,
        tpot_p50_ms=20.0,
        output_tok_s=2000.0,
    )
    roof = roofline(r, hardware("h200"), model("llama-3.1-70b"))
    d, p = roof.decode, roof.prefill
    assert d is not None and p is not None
    # Little's law: 2000 tok/s × 0.020 s = 40 requests decoding; one copy reads 70e9 × 1 B
    assert d.batch == pytest.approx(40.0) and d.batch_from == "output tok/s × TPOT"
    assert d.weight_bytes == pytest.approx(70e9)
    # KV: 2 × 80 layers × 8 heads × 128 × 2 B (bf16) a token; 8 heads over tp 4: read once
    assert d.kv_bytes_per_token == 2 * 80 * 8 * 128 * 2 and d.kv_reads == 1
    assert d.context_tokens == 1000 + 1000 / 2
    assert d.kv_bytes == pytest.approx(40 * 1500 * 327_680)
    assert d.fraction == pytest.approx((70e9 + 40 * 1500 * 327_680) / 0.020 / (4 * 4.8e12))
    # prefill: 2000 prompt tok/s × (2 × 70e9 + 4 × 80 layers × 64 heads × 128 × 1000 / 2)
    flops = 2 * 70e9 + 4 * 80 * 64 * 128 * 500
    assert p.flops_per_token == pytest.approx(flops)
    assert p.peak_format == "fp8" and p.peak_tflops == 1979
    assert p.fraction == pytest.approx(2000 * flops / (4 * 1979e12))
    assert summary(roof) == (
        f"decode {d.fraction * 100:.0f}% of HBM bandwidth (4.8 TB/s), "
        f"prefill {p.fraction * 100:.2g}% of fp8 compute (1979 TFLOPS)"
    )
    assert roof.assumptions == [
        "KV cache taken as bf16 (the model's dtype): the result does not say"
    ]


def test_moe_reads_only_the_active_weights_for_one_token_a_copy() -> None:
    """DeepSeek-R1 in fp8 on 8 B200s (tp 8): one request decoding reads the dense weights
    and k of E experts: 37e9 active params × 1 B; MLA's latent is read by all 8 GPUs."""
    r = result(
        hardware="b200",
        gpus=8,
        topology={"mode": "aggregated", "gpus": 8, "parallel": {"tp": 8, "ep": 8}},
        tpot_p50_ms=20.0,
        output_tok_s=50.0,  # × 20 ms = 1 request
    )
    roof = roofline(r, hardware("b200"), model("deepseek-r1"), kv_dtype="fp8")
    assert roof.decode is not None
    assert roof.decode.weight_bytes == pytest.approx(37e9)
    assert roof.decode.kv_bytes_per_token == 61 * (512 + 64) * 1
    assert roof.decode.kv_reads == 8
    assert roof.assumptions == []


def test_more_tokens_a_step_touch_more_experts() -> None:
    def weights(output_tok_s: float) -> float:
        r = result(hardware="b200", gpus=8, topology=None, output_tok_s=output_tok_s)
        roof = roofline(r, hardware("b200"), model("deepseek-r1"))
        assert roof.decode is not None
        return roof.decode.weight_bytes

    assert weights(50.0) < weights(500.0) < weights(5000.0) < 671e9


@pytest.mark.parametrize(
    ("change", "decode_missing", "prefill_missing"),
    [
        ({"hardware": "gaudi9"}, "hardware gaudi9 is not in", "hardware gaudi9 is not in"),
        ({"precision": "fp3"}, "precision fp3 is not", "precision fp3 is not"),
        ({"tpot_p50_ms": None}, "no TPOT p50", None),
        ({"isl": None}, "no input and output lengths", "no input length"),
        ({"gpus": 4}, None, None),
    ],
    ids=["unknown-hardware", "unknown-precision", "no-tpot", "no-lengths", "complete"],
)
def test_a_missing_share_says_why(
    change: dict[str, object], decode_missing: str | None, prefill_missing: str | None
) -> None:
    r = result(topology=None, **change)  # type: ignore[arg-type]
    known = hardware("h200") if r.hardware == "h200" else None
    roof = roofline(r, known, model("deepseek-r1"))
    for share, missing, why in (
        (roof.decode, decode_missing, roof.decode_missing),
        (roof.prefill, prefill_missing, roof.prefill_missing),
    ):
        if missing is None:
            assert share is not None and why is None
        else:
            assert share is None and why is not None and why.startswith(missing)


def test_without_topology_across_nodes_decode_is_unknown() -> None:
    r = result(topology=None, gpus=16).model_copy(
        update={"engine": result().engine.model_copy(update={"orchestrator": "dynamo"})}
    )
    roof = roofline(r, hardware("h200"), model("deepseek-r1"))
    assert roof.decode is None and roof.decode_missing is not None
    assert "topology" in roof.decode_missing
    assert roof.prefill is not None


@pytest.fixture(scope="module")
def repo() -> Repo:
    return load_repo(WorkTree(Path(ROOT)))


def test_every_result_gives_finite_shares_under_one_where_published(repo: Repo) -> None:
    found: list[Roofline] = []
    for r in repo.results:
        roof = result_roofline(repo, r)
        for share in (roof.decode, roof.prefill):
            if share is None:
                continue
            assert math.isfinite(share.fraction) and share.fraction >= 0, r.id
            if r.source.kind == "published":
                assert share.fraction < 1, f"{r.id}: {summary(roof)}"
        found.append(roof)
    assert sum(roof.decode is not None for roof in found) > len(found) / 2


def test_a_published_h200_result_by_alias(repo: Repo) -> None:
    published = next(
        r for r in repo.results if r.hardware == "h200" and r.source.kind == "published"
    )
    by_alias = published.model_copy(update={"model": "DeepSeek-R1-0528"})
    roof = result_roofline(repo, by_alias)
    assert roof.hardware == "h200" and roof.decode is not None
    assert 0 < roof.decode.fraction < 1
    assert summary(roof).startswith("decode ")
