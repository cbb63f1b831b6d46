"""SGLang: each engine-neutral setting as flags per version, spellings translated, the
refusals word for word, attention DP, multi-node and P/D argv."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.engines.cards import card
from reconciler.engines.sglang import argv as sglang
from reconciler.errors import UnsupportedSetting
from reconciler.spec.recipe import Parallel, Settings
from reconciler.spec.repo import Repo
from tests.engines.conftest import fleet, recipe, units_of

NEW, OLD = sglang.table("0.5.23"), sglang.table("0.5.12.post1")
BASE = ["--mem-fraction-static", "0.9"]


@pytest.mark.parametrize(
    ("kv_dtype", "flag"),
    [("auto", None), ("bf16", "bf16"), ("fp8", "fp8_e4m3"), ("fp8_e4m3", "fp8_e4m3"),
     ("fp8_e5m2", "fp8_e5m2")],
)  # fmt: skip
def test_kv_dtype_spelling(kv_dtype: str, flag: str | None) -> None:
    argv = sglang.settings_flags(Settings.model_validate({"kv_cache": {"dtype": kv_dtype}}), NEW)
    assert argv == (["--kv-cache-dtype", flag] if flag else []) + BASE


@pytest.mark.parametrize(
    ("settings", "flags"),
    [
        pytest.param({}, BASE, id="defaults"),
        pytest.param({"max_batch": 256}, ["--max-running-requests", "256", *BASE], id="batch"),
        pytest.param(
            {"max_batched_tokens": 16384}, ["--max-prefill-tokens", "16384", *BASE], id="tokens"
        ),
        pytest.param({"chunked_prefill": True}, BASE, id="chunk-on-by-default"),
        pytest.param(
            {"chunked_prefill": False}, ["--chunked-prefill-size", "-1", *BASE], id="chunk-off"
        ),
        pytest.param(
            {"chunked_prefill": 8192}, ["--chunked-prefill-size", "8192", *BASE], id="chunk-size"
        ),
        pytest.param({"max_model_len": 32768}, ["--context-length", "32768", *BASE], id="len"),
        pytest.param({"dtype": "bfloat16"}, ["--dtype", "bfloat16", *BASE], id="dtype"),
        pytest.param(
            {"kv_cache": {"prefix_caching": False}}, ["--disable-radix-cache", *BASE], id="radix"
        ),
        pytest.param(
            {"kv_cache": {"offload": "cpu", "offload_gb": 64}},
            [*BASE, "--enable-hierarchical-cache", "--hicache-size", "64"],
            id="offload",
        ),
        pytest.param(
            {"kv_cache": {"offload": "cpu"}}, [*BASE, "--enable-hierarchical-cache"], id="hicache"
        ),
        pytest.param({"quantization": "fp4"}, [*BASE, "--quantization", "modelopt_fp4"], id="fp4"),
        pytest.param(
            {"quantization": "w8a8_fp8"}, [*BASE, "--quantization", "w8a8_fp8"], id="w8a8"
        ),
        pytest.param(
            {"speculative": {"method": "mtp", "draft_tokens": 3}},
            [*BASE, "--speculative-algorithm", "NEXTN", "--speculative-num-steps", "3",
             "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"],
            id="mtp",
        ),
        pytest.param(
            {"speculative": {"method": "draft_model", "draft_tokens": 2, "draft_model": "hf://o/d@abc1234"}},
            [*BASE, "--speculative-algorithm", "STANDALONE", "--speculative-num-steps", "2",
             "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "3",
             "--speculative-draft-model-path", "o/d",
             "--speculative-draft-model-revision", "abc1234"],
            id="standalone",
        ),
        pytest.param(
            {"speculative": {"method": "ngram", "draft_tokens": 4}},
            [*BASE, "--speculative-algorithm", "NGRAM", "--speculative-num-draft-tokens", "5"],
            id="ngram",
        ),
        pytest.param(
            {"cuda_graphs": False},
            [*BASE, "--cuda-graph-backend-decode", "disabled",
             "--cuda-graph-backend-prefill", "disabled"],
            id="no-graphs",
        ),
    ],
)  # fmt: skip
def test_settings_flags(settings: dict[str, Any], flags: list[str]) -> None:
    assert sglang.settings_flags(Settings.model_validate(settings), NEW) == flags


def test_cuda_graphs_off_before_the_backend_flags() -> None:
    argv = sglang.settings_flags(Settings(cuda_graphs=False), OLD)
    assert argv == [*BASE, "--disable-cuda-graph"]


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        pytest.param(
            {"quantization": "int4"},
            "settings.quantization int4 is not supported on sglang 0.5.23: int4 names no one "
            "method; use awq or gptq, the checkpoint's format",
            id="int4",
        ),
        pytest.param(
            {"kv_cache": {"offload": "cpu", "offload_gb": 1.5}},
            "settings.kv_cache.offload_gb 1.5 is not supported on sglang 0.5.23: --hicache-size "
            "takes whole GB",
            id="offload-fraction",
        ),
        pytest.param(
            {"kv_cache": {"offload_gb": 8}},
            "settings.kv_cache.offload_gb 8 is not supported on sglang 0.5.23: it sizes a KV "
            "offload, and settings.kv_cache.offload is none",
            id="offload-size-alone",
        ),
    ],
)
def test_refused_settings(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(UnsupportedSetting) as caught:
        sglang.settings_flags(Settings.model_validate(settings), NEW)
    assert str(caught.value) == message


@pytest.mark.parametrize(
    ("parallel", "version", "flags"),
    [
        pytest.param({"tp": 8}, "0.5.23", ["--tp-size", "8"], id="tp"),
        pytest.param({"tp": 8, "ep": 8}, "0.5.23", ["--tp-size", "8", "--ep-size", "8"], id="ep"),
        pytest.param(
            {"tp": 8, "dp": 8, "ep": 8, "dp_attention": True},
            "0.5.23",
            ["--tp-size", "8", "--ep-size", "8", "--attn-dp-size", "8"],
            id="dpa-new",
        ),
        pytest.param(
            {"tp": 8, "dp": 8, "ep": 8, "dp_attention": True},
            "0.5.16",
            ["--tp-size", "8", "--ep-size", "8", "--dp-size", "8", "--enable-dp-attention"],
            id="dpa-old",
        ),
        pytest.param({"tp": 2, "dp": 4}, "0.5.23", ["--tp-size", "2", "--dp-size", "4"], id="dp"),
        pytest.param({"tp": 4, "pp": 2}, "0.5.23", ["--tp-size", "4", "--pp-size", "2"], id="pp"),
    ],
)
def test_parallel_flags(parallel: dict[str, Any], version: str, flags: list[str]) -> None:
    table = sglang.table(version)
    assert (
        sglang.parallel(Parallel.model_validate(parallel), 1, "topology.parallel", table) == flags
    )


def test_expert_parallel_inside_the_tp_group() -> None:
    with pytest.raises(UnsupportedSetting) as caught:
        sglang.parallel(Parallel(tp=1, dp=8, ep=8), 1, "topology.parallel", NEW)
    assert str(caught.value) == (
        "topology.parallel.ep 8 is not supported on sglang 0.5.23: SGLang runs expert "
        "parallelism inside the TP group, so ep must divide tp (1)"
    )


HEAD = ["python3", "-m", "sglang.launch_server", "--model-path", "org/model"]
HEAD += ["--served-model-name", "chat", "--revision", "0123abc"]
TAIL = [*BASE, "--enable-metrics", "--random-seed", "0"]


def test_multi_node_replica(repo: Repo) -> None:
    """A 16-GPU replica on two 8-GPU hosts of one NVLink domain (GB200-like)."""
    parallel = {"tp": 16, "dp": 16, "ep": 16, "dp_attention": True}
    spec = recipe(
        "sglang", "0.5.23", topology={"mode": "aggregated", "gpus": 16, "parallel": parallel}
    )
    head, second, router = units_of(repo, spec, fleet("gb200-nvl72", 2, 8, domain="nvl"), 72)
    layout = ["--tp-size", "16", "--ep-size", "16", "--attn-dp-size", "16"]
    init = ["--dist-init-addr", "10.0.0.1:8033"]
    assert head.argv == [
        *HEAD, "--host", "10.0.0.1", "--port", "8032", *layout,
        "--nnodes", "2", "--node-rank", "0", *init, *TAIL,
    ]  # fmt: skip
    assert second.argv == [*HEAD, *layout, "--nnodes", "2", "--node-rank", "1", *init, *TAIL]
    assert (second.host, second.port, second.gpu_indices) == ("node-02", None, list(range(8)))
    assert router.argv[router.argv.index("--worker-urls") + 1 :][0] == "http://10.0.0.1:8032"


def test_multi_node_data_parallel_without_attention_dp(repo: Repo) -> None:
    spec = recipe(
        "sglang",
        "0.5.23",
        topology={"mode": "aggregated", "gpus": 16, "parallel": {"tp": 8, "dp": 2}},
    )
    with pytest.raises(UnsupportedSetting) as caught:
        units_of(repo, spec, fleet("gb200-nvl72", 2, 8, domain="nvl"), 72)
    assert str(caught.value) == (
        "topology.parallel.dp 2 is not supported on sglang 0.5.23: a replica over 2 hosts "
        "spans them with its TP group; DP replicas without dp_attention do not span hosts "
        "(run them as replicas)"
    )


PD = {
    "mode": "disaggregated",
    "prefill": {"gpus": 4, "parallel": {"tp": 4}},
    "decode": {"gpus": 4, "replicas": 2, "parallel": {"tp": 4}},
}


def test_disaggregated_pools(repo: Repo) -> None:
    spec = recipe("sglang", "0.5.23", topology=PD)
    prefill, decode0, decode1, router = units_of(repo, spec, fleet(hosts=2))
    assert prefill.argv[-9:] == [
        "--disaggregation-mode", "prefill", "--disaggregation-transfer-backend", "nixl",
        "--disaggregation-bootstrap-port", "8035", "--enable-metrics", "--random-seed", "0",
    ]  # fmt: skip
    assert decode1.argv[-7:] == [
        "--disaggregation-mode", "decode", "--disaggregation-transfer-backend", "nixl",
        "--enable-metrics", "--random-seed", "0",
    ]  # fmt: skip
    assert (prefill.bootstrap_port, decode0.bootstrap_port) == (8035, None)
    assert router.engine == "sglang-router"
    assert router.argv[3:] == [
        "--host", "10.0.0.1", "--port", "8000", "--pd-disaggregation",
        "--prefill", "http://10.0.0.1:8032", "8035",
        "--decode", "http://10.0.0.1:8064", "--decode", "http://10.0.0.2:8096",
        "--policy", "cache_aware", "--disable-circuit-breaker", "--health-check-interval-secs",
        "10", "--prometheus-host", "10.0.0.1", "--prometheus-port", "8001",
    ]  # fmt: skip


def test_amd_pools_move_kv_with_mori(repo: Repo) -> None:
    spec = recipe("sglang", "0.5.9", topology=PD, hardware="mi355x")
    prefill = units_of(repo, spec, fleet("mi355x"))[0]
    assert "mori" in prefill.argv and prefill.env == {"HIP_VISIBLE_DEVICES": "0,1,2,3"}
    with pytest.raises(UnsupportedSetting) as caught:
        units_of(repo, recipe("sglang", "0.5.8", topology=PD, hardware="mi355x"), fleet("mi355x"))
    assert str(caught.value) == (
        "topology.mode disaggregated is not supported on sglang 0.5.8: denv moves KV between "
        "pools with mori on amd hardware, and sglang 0.5.8 has no mori transfer backend"
    )


def test_ngram_refused_with_attention_dp(repo: Repo) -> None:
    parallel = {"tp": 8, "dp": 8, "dp_attention": True}
    spec = recipe(
        "sglang", "0.5.23",
        topology={"mode": "aggregated", "gpus": 8, "parallel": parallel},
        settings={"speculative": {"method": "ngram", "draft_tokens": 4}},
    )  # fmt: skip
    with pytest.raises(UnsupportedSetting) as caught:
        units_of(repo, spec, fleet())
    assert str(caught.value) == (
        "settings.speculative.method ngram is not supported on sglang 0.5.23: SGLang's ngram "
        "drafting does not run with attention DP (topology.parallel.dp_attention)"
    )


def test_probes_and_metric_names(repo: Repo) -> None:
    unit = units_of(repo, recipe("sglang", "0.5.23"), fleet())[0]
    assert unit.readiness == unit.health == sglang.health()
    assert unit.metrics is not None and unit.metrics.running == "sglang:num_running_reqs"
    series = {metric: s.name for metric, s in card("sglang").ALARM_SERIES.metrics.items()}
    assert (series["ttft"], series["kv_usage"], series["queue_time"], series["waiting"]) == (
        "sglang:time_to_first_token_seconds", "sglang:token_usage", "sglang:queue_time_seconds",
        "sglang:num_queue_reqs",
    )  # fmt: skip
