"""The performance model moves the right way on every lever, and its formulas hold."""

from __future__ import annotations

import pytest

from reconciler.catalog.footprint import (
    experts_touched,
    kv_bytes_per_token,
    kv_token_bytes,
    split_params,
)
from reconciler.engines.model.levers import tokens_per_step
from reconciler.engines.model.perf import Batch, PerfModel, WeightsDoNotFit
from tests.engines.model.perfspecs import model, perf


@pytest.mark.parametrize(
    ("key", "value_bytes", "expected"),
    [
        ("llama-3.1-8b", 2.0, 2 * 32 * 8 * 128 * 2),  # GQA: 2 × layers × kv_heads × head_dim
        ("llama-3.1-70b", 1.0, 2 * 80 * 8 * 128 * 1),
        ("deepseek-r1", 2.0, 61 * (512 + 64) * 2),  # MLA: layers × (rank + rope)
    ],
    ids=["llama-8b-bf16", "llama-70b-fp8", "deepseek-mla"],
)
def test_kv_bytes_per_token(key: str, value_bytes: float, expected: float) -> None:
    assert kv_bytes_per_token(model(key), value_bytes) == expected


def test_kv_token_bytes_reads_the_dtype_and_shards_gqa_heads() -> None:
    arch = model("llama-3.1-70b")  # 8 KV heads
    whole = 2 * 80 * 8 * 128 * 2
    assert kv_token_bytes(arch, "auto", 4) == (whole, whole / 4)
    assert kv_token_bytes(arch, None, 4) == kv_token_bytes(arch, "bf16", 4)  # unknown: bf16
    assert kv_token_bytes(arch, "fp8", 16) == (whole / 2, whole / 2 / 8)  # a head is never split


def test_experts_touched_grows_with_the_tokens_of_a_step() -> None:
    assert experts_touched(0.0, 1) == 1.0  # dense: every weight is read
    assert experts_touched(1 - 8 / 256, 1) == pytest.approx(8 / 256)
    assert experts_touched(1 - 8 / 256, 1000) == pytest.approx(1.0, abs=1e-12)


def test_moe_split_adds_up_to_total_and_active() -> None:
    arch = model("deepseek-r1")
    dense, expert = split_params(arch)
    assert dense + expert == pytest.approx(arch.params_b * 1e9)
    assert dense + expert * 8 / 256 == pytest.approx(37e9)
    assert split_params(model("llama-3.1-70b")) == (70e9, 0.0)


def test_higher_tp_lowers_ttft_and_decode_time_of_70b() -> None:
    prefill = [perf(tp=tp).prefill_time(2048) for tp in (2, 4, 8)]
    decode = [perf(tp=tp).decode_step_time(8, 2048) for tp in (2, 4, 8)]
    assert prefill == sorted(prefill, reverse=True) and prefill[0] > 1.5 * prefill[2]
    assert decode == sorted(decode, reverse=True)


@pytest.mark.parametrize(
    ("kwargs", "hw"),
    [({}, "h200"), ({"tp": 8}, "h100"), ({"quantization": "fp8"}, "h200")],
    ids=["tp4-h200", "tp8-h100", "fp8-weights"],
)
def test_fp8_kv_about_doubles_kv_capacity(kwargs: dict[str, object], hw: str) -> None:
    bf16 = perf(hw=hw, **kwargs)
    fp8 = perf(hw=hw, kv_cache={"dtype": "fp8"}, **kwargs)
    assert fp8.kv_capacity_tokens == pytest.approx(2 * bf16.kv_capacity_tokens, rel=0.01)


@pytest.mark.parametrize(
    ("model_key", "hw", "base", "quantized"),
    [
        ("llama-3.1-70b", "h200", "none", "fp8"),
        ("llama-3.1-70b", "h200", "none", "awq"),
        ("deepseek-r1", "b200", "fp8", "nvfp4"),
    ],
    ids=["bf16-to-fp8", "bf16-to-awq", "fp8-to-nvfp4"],
)
def test_quantized_weights_lower_decode_step_and_free_kv(
    model_key: str, hw: str, base: str, quantized: str
) -> None:
    a = perf(model_key, hw, tp=8, quantization=base)
    b = perf(model_key, hw, tp=8, quantization=quantized)
    assert b.decode_step_time(16, 2048) < a.decode_step_time(16, 2048)
    assert b.weight_bytes_per_gpu < a.weight_bytes_per_gpu
    assert b.kv_capacity_tokens > a.kv_capacity_tokens


def test_fp8_gemms_prefill_faster_than_bf16() -> None:
    assert perf(quantization="fp8").prefill_time(8192) < perf().prefill_time(8192)


@pytest.mark.parametrize("batch", [1, 4, 32], ids=lambda b: f"batch{b}")
def test_cuda_graphs_lower_small_batch_step_time(batch: int) -> None:
    graphs = perf(model_key="llama-3.1-8b", tp=1)
    eager = perf(model_key="llama-3.1-8b", tp=1, cuda_graphs=False)
    assert graphs.decode_step_time(batch, 1024) < eager.decode_step_time(batch, 1024)


def test_cuda_graphs_do_not_matter_past_the_captured_batch() -> None:
    graphs = perf(model_key="llama-3.1-8b", tp=1)
    eager = perf(model_key="llama-3.1-8b", tp=1, cuda_graphs=False)
    assert graphs.decode_step_time(600, 512) == eager.decode_step_time(600, 512)


@pytest.mark.parametrize(
    ("method", "extra"),
    [("mtp", {}), ("eagle3", {"draft_model": "x/eagle3"}), ("ngram", {})],
    ids=["mtp", "eagle3", "ngram"],
)
def test_speculative_decoding_raises_tokens_per_step(method: str, extra: dict[str, str]) -> None:
    plain = perf("deepseek-r1", "b200", tp=8, quantization="fp8")
    steps = [
        perf(
            "deepseek-r1",
            "b200",
            tp=8,
            quantization="fp8",
            speculative={"method": method, "draft_tokens": n, **extra},
        )
        for n in (1, 2, 3)
    ]
    assert plain.tokens_per_step == 1.0
    per_step = [s.tokens_per_step for s in steps]
    assert 1.0 < per_step[0] < per_step[1] < per_step[2] < 4.0
    # a verify step costs more than a plain one; with good drafts, less than it gains (n-gram
    # drafts, rarely accepted, can cost more on an MoE: verify tokens touch more experts)
    verify = steps[1].decode_step_time(8, 2048)
    assert verify > plain.decode_step_time(8, 2048)
    if method != "ngram":
        assert verify / steps[1].tokens_per_step < plain.decode_step_time(8, 2048)


@pytest.mark.parametrize(
    ("acceptance", "drafts", "expected"),
    [(0.0, 3, 1.0), (0.5, 1, 1.5), (0.5, 3, 1.875), (1.0, 2, 3.0), (0.8, 0, 1.0)],
)
def test_tokens_per_step_formula(acceptance: float, drafts: int, expected: float) -> None:
    assert tokens_per_step(acceptance, drafts) == pytest.approx(expected)


def test_moe_decode_reads_only_the_experts_routed_to() -> None:
    moe = perf("deepseek-r1", "h200", tp=8, quantization="fp8")
    one, many = moe.decode_step_time(1, 1024), moe.decode_step_time(256, 1024)
    assert many > 2 * one  # more experts touched, more bytes read
    assert many < 256 * one


def test_weights_that_do_not_fit_are_refused() -> None:
    with pytest.raises(WeightsDoNotFit, match="per GPU"):
        perf(hw="h100", tp=1)


def test_disaggregation_has_a_kv_transfer_and_aggregation_none() -> None:
    topology = {
        "mode": "disaggregated",
        "prefill": {"replicas": 1, "gpus": 4, "parallel": {"tp": 4}},
        "decode": {"replicas": 1, "gpus": 4, "parallel": {"tp": 4}},
    }
    decode = perf(role="decode", topology=topology)
    assert decode.kv_transfer_s(8192) > decode.kv_transfer_s(1024) > 0
    assert perf().kv_transfer_s(8192) == 0.0
    assert not decode.prefix_caching  # its KV arrives from the prefill worker


def test_pooled_replicas_hold_more_and_step_like_one() -> None:
    one = perf()
    two = one.pooled(2)
    assert two.kv_capacity_tokens == 2 * one.kv_capacity_tokens
    assert two.max_running == 2 * one.max_running
    assert two.decode_step_time(16, 1024) == pytest.approx(one.decode_step_time(8, 1024))


def test_step_time_grows_with_context_and_prefill() -> None:
    m = perf()
    assert m.decode_step_time(32, 8192) > m.decode_step_time(32, 1024)
    mixed = m.step_time(
        Batch(decode=32, decode_ctx=32 * 1024, prefill=2048, prefill_pairs=2048**2 / 2)
    )
    assert mixed > m.decode_step_time(32, 1024)
    assert m.step_time(Batch()) == 0.0


@pytest.mark.parametrize(
    ("parallel", "expert_share", "dense_share"),
    [
        ({"tp": 1, "dp": 8, "ep": 8}, 8, 1),  # vLLM: DP attention ranks, experts over all 8
        ({"tp": 8, "dp": 8, "ep": 8, "dp_attention": True}, 8, 1),  # SGLang DP attention
        ({"tp": 8, "ep": 8}, 8, 8),  # plain TP/EP
        ({"tp": 2, "dp": 4}, 2, 2),  # four independent TP 2 engines
    ],
    ids=["vllm-dp-ep", "sglang-dpa", "tp-ep", "dp-engines"],
)
def test_parallel_layouts_share_weights(
    parallel: dict[str, object], expert_share: int, dense_share: int
) -> None:
    topology = {"mode": "aggregated", "gpus": 8, "parallel": parallel}
    m = perf("qwen3-235b-a22b", "h200", topology=topology, quantization="fp8")
    dense, expert = split_params(model("qwen3-235b-a22b"))
    assert m.weight_bytes_per_gpu == pytest.approx(dense / dense_share + expert / expert_share)


def test_every_recipe_of_the_repository_fits_its_first_hardware() -> None:
    """A recipe whose weights leave no KV room at its memory fraction cannot start."""
    from reconciler.engines.model.predict import sim_spec as predict_spec
    from reconciler.spec.loader import open_repo
    from reconciler.spec.recipe import DisaggregatedTopology
    from tests.conftest import ROOT

    repo = open_repo(ROOT)
    for recipe in repo.recipes.values():
        hw = repo.resolve_hardware(recipe.hardware[0])
        assert hw is not None
        roles = (
            ("prefill", "decode")
            if isinstance(recipe.topology, DisaggregatedTopology)
            else ("aggregated",)
        )
        for role in roles:
            PerfModel.from_spec(predict_spec(recipe, hw, repo.models[recipe.model], role))
