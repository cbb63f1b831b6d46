"""vLLM: each engine-neutral setting as flags, the refusals word for word, parallel layouts
and multi-node argv."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.engines.cards import card
from reconciler.engines.vllm import argv as vllm
from reconciler.errors import UnsupportedSetting
from reconciler.spec.recipe import Parallel, Settings
from reconciler.spec.repo import Repo
from tests.engines.conftest import fleet, recipe, units_of

TABLE = vllm.table("0.33.0")
BASE = ["--gpu-memory-utilization", "0.9"]


@pytest.mark.parametrize(
    ("settings", "flags"),
    [
        pytest.param({}, BASE, id="defaults"),
        pytest.param({"max_batch": 256}, ["--max-num-seqs", "256", *BASE], id="max_batch"),
        pytest.param(
            {"max_batched_tokens": 8192}, ["--max-num-batched-tokens", "8192", *BASE], id="tokens"
        ),
        pytest.param({"chunked_prefill": True}, ["--enable-chunked-prefill", *BASE], id="chunk-on"),
        pytest.param(
            {"chunked_prefill": False}, ["--disable-chunked-prefill", *BASE], id="chunk-off"
        ),
        pytest.param(
            {"chunked_prefill": 4096},
            ["--max-num-batched-tokens", "4096", "--enable-chunked-prefill", *BASE],
            id="chunk-size",
        ),
        pytest.param({"max_model_len": 32768}, ["--max-model-len", "32768", *BASE], id="len"),
        pytest.param({"dtype": "float16"}, ["--dtype", "float16", *BASE], id="dtype"),
        pytest.param(
            {"kv_cache": {"dtype": "bf16"}}, ["--kv-cache-dtype", "bfloat16", *BASE], id="kv-bf16"
        ),
        pytest.param(
            {"kv_cache": {"dtype": "fp8"}}, ["--kv-cache-dtype", "fp8", *BASE], id="kv-fp8"
        ),
        pytest.param(
            {"kv_cache": {"prefix_caching": False, "memory_fraction": 0.85}},
            ["--disable-prefix-caching", "--gpu-memory-utilization", "0.85"],
            id="no-prefix-cache",
        ),
        pytest.param(
            {"kv_cache": {"offload": "cpu", "offload_gb": 64}},
            [*BASE, "--kv-offloading-size", "64", "--kv-offloading-backend", "native"],
            id="offload",
        ),
        pytest.param(
            {"quantization": "nvfp4"}, [*BASE, "--quantization", "modelopt_fp4"], id="fp4"
        ),
        pytest.param({"quantization": "mxfp4"}, [*BASE, "--quantization", "mxfp4"], id="mxfp4"),
        pytest.param(
            {"speculative": {"method": "mtp", "draft_tokens": 3}},
            [*BASE, "--speculative-config", '{"method":"mtp","num_speculative_tokens":3}'],
            id="mtp",
        ),
        pytest.param(
            {
                "speculative": {
                    "method": "eagle3",
                    "draft_tokens": 2,
                    "draft_model": "hf://o/d@abc1234",
                }
            },
            [
                *BASE,
                "--speculative-config",
                '{"method":"eagle3","model":"o/d","revision":"abc1234","num_speculative_tokens":2}',
            ],
            id="eagle3",
        ),
        pytest.param({"cuda_graphs": False}, [*BASE, "--enforce-eager"], id="eager"),
    ],
)
def test_settings_flags(settings: dict[str, Any], flags: list[str]) -> None:
    assert vllm.settings_flags(Settings.model_validate(settings), TABLE) == flags


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        pytest.param(
            {"quantization": "int4"},
            "settings.quantization int4 is not supported on vllm 0.33.0: int4 names no one "
            "method; use awq or gptq, the checkpoint's format",
            id="int4",
        ),
        pytest.param(
            {"quantization": "w8a8_fp8"},
            "settings.quantization w8a8_fp8 is not supported on vllm 0.33.0: vLLM has no "
            "w8a8_fp8 method; FP8 checkpoints load with quantization fp8",
            id="w8a8_fp8",
        ),
        pytest.param(
            {"kv_cache": {"offload": "cpu"}},
            "settings.kv_cache.offload cpu is not supported on vllm 0.33.0: vLLM sizes its CPU KV "
            "cache with --kv-offloading-size: set settings.kv_cache.offload_gb",
            id="offload-unsized",
        ),
        pytest.param(
            {"kv_cache": {"offload_gb": 32}},
            "settings.kv_cache.offload_gb 32 is not supported on vllm 0.33.0: it sizes a KV "
            "offload, and settings.kv_cache.offload is none",
            id="offload-size-alone",
        ),
        pytest.param(
            {"chunked_prefill": 4096, "max_batched_tokens": 8192},
            "settings.chunked_prefill 4096 is not supported on vllm 0.33.0: vLLM's prefill chunk "
            "is --max-num-batched-tokens, and settings.max_batched_tokens is 8192; make them "
            "equal or drop one",
            id="chunk-vs-batch",
        ),
        pytest.param(
            {"speculative": {"draft_tokens": 2}},
            "settings.speculative.method none is not supported on vllm 0.33.0: draft_tokens and "
            "draft_model are set; name the method that uses them",
            id="draft-without-method",
        ),
        pytest.param(
            {"speculative": {"method": "ngram", "draft_tokens": 2, "draft_model": "o/d"}},
            "settings.speculative.draft_model o/d is not supported on vllm 0.33.0: ngram drafts "
            "from the prompt and takes no draft model",
            id="ngram-draft-model",
        ),
    ],
)
def test_refused_settings(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(UnsupportedSetting) as caught:
        vllm.settings_flags(Settings.model_validate(settings), TABLE)
    assert str(caught.value) == message


@pytest.mark.parametrize(
    ("parallel", "layout"),
    [
        pytest.param({"tp": 8}, (8, 1, 1, False), id="tp"),
        pytest.param({"tp": 1, "dp": 8, "ep": 8}, (1, 1, 8, True), id="dp-ep"),
        pytest.param({"tp": 8, "dp": 8, "ep": 8, "dp_attention": True}, (1, 1, 8, True), id="dpa"),
        pytest.param({"tp": 8, "dp": 4, "dp_attention": True}, (2, 1, 4, False), id="dpa-tp2"),
        pytest.param({"tp": 4, "pp": 2}, (4, 2, 1, False), id="pp"),
    ],
)
def test_parallel_layout(parallel: dict[str, Any], layout: tuple[int, int, int, bool]) -> None:
    assert vllm.parallel(Parallel.model_validate(parallel), "topology.parallel", "v") == layout


def test_expert_parallel_must_span_tp_times_dp() -> None:
    with pytest.raises(UnsupportedSetting) as caught:
        vllm.parallel(Parallel(tp=8, ep=2), "topology.parallel", "vllm 0.33.0")
    assert str(caught.value) == (
        "topology.parallel.ep 2 is not supported on vllm 0.33.0: vLLM's expert parallelism "
        "spans tp × dp (8 GPUs), so ep must be 1 or 8"
    )


MULTI = ["vllm", "serve", "org/model", "--served-model-name", "chat", "--revision", "0123abc"]
TAIL = [*BASE, "--seed", "0"]


def test_multi_node_tensor_parallel(repo: Repo) -> None:
    """A 16-GPU TP replica on two 8-GPU hosts of one NVLink domain: --nnodes, headless rank."""
    spec = recipe(topology={"mode": "aggregated", "gpus": 16, "parallel": {"tp": 16}})
    target = fleet("gb200-nvl72", hosts=2, gpus=8, domain="nvl")
    head, second, _ = units_of(repo, spec, target, 72)
    rendezvous = ["--master-addr", "10.0.0.1", "--master-port", "8033"]
    assert head.argv == [
        *MULTI, "--host", "10.0.0.1", "--port", "8032", "--tensor-parallel-size", "16",
        "--nnodes", "2", "--node-rank", "0", *rendezvous, *TAIL,
    ]  # fmt: skip
    assert second.argv == [
        *MULTI, "--tensor-parallel-size", "16",
        "--nnodes", "2", "--node-rank", "1", *rendezvous, "--headless", *TAIL,
    ]  # fmt: skip
    assert (head.name, head.port, second.name, second.port) == (
        "aggregated-0-node0", 8032, "aggregated-0-node1", None,
    )  # fmt: skip
    assert second.env == {"CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7"}
    assert second.health is None and second.metrics is None


def test_multi_node_data_parallel(repo: Repo) -> None:
    """DP ranks split over the hosts: --data-parallel-size-local, start rank, headless."""
    parallel = {"tp": 4, "dp": 4, "ep": 16}
    spec = recipe(topology={"mode": "aggregated", "gpus": 16, "parallel": parallel})
    head, second, _ = units_of(repo, spec, fleet("gb200-nvl72", 2, 8, domain="nvl"), 72)
    layout = [
        "--tensor-parallel-size",
        "4",
        "--data-parallel-size",
        "4",
        "--enable-expert-parallel",
    ]
    dp = ["--data-parallel-size-local", "2", "--data-parallel-address", "10.0.0.1"]
    dp += ["--data-parallel-rpc-port", "8034"]
    assert head.argv == [*MULTI, "--host", "10.0.0.1", "--port", "8032", *layout, *dp, *TAIL]
    assert second.argv == [
        *MULTI, *layout, *dp, "--data-parallel-start-rank", "2", "--headless", *TAIL,
    ]  # fmt: skip


def test_multi_node_data_parallel_needs_whole_ranks_per_host(repo: Repo) -> None:
    spec = recipe(topology={"mode": "aggregated", "gpus": 6, "parallel": {"tp": 2, "dp": 3}})
    with pytest.raises(UnsupportedSetting) as caught:
        units_of(repo, spec, fleet("gb200-nvl72", 2, 4, domain="nvl"), 72)
    assert str(caught.value) == (
        "topology.parallel.dp 3 is not supported on vllm 0.33.0: a replica over 2 hosts runs "
        "one or more whole DP ranks on each (at most 16), so dp must be a multiple of 2; or "
        "use dp 1 and spread tp × pp"
    )


def test_disaggregated_pools_use_nixl(repo: Repo) -> None:
    topology = {
        "mode": "disaggregated",
        "prefill": {"gpus": 2, "parallel": {"tp": 2}},
        "decode": {"gpus": 4, "parallel": {"tp": 4}},
    }
    prefill, decode, router = units_of(repo, recipe(topology=topology), fleet())
    assert prefill.argv[-4:] == [
        "--kv-transfer-config",
        '{"kv_connector":"NixlConnector","kv_role":"kv_producer"}',
        "--seed",
        "0",
    ]
    assert '"kv_role":"kv_consumer"' in decode.argv[decode.argv.index("--kv-transfer-config") + 1]
    assert prefill.env == {
        "CUDA_VISIBLE_DEVICES": "4,5",
        "VLLM_NIXL_SIDE_CHANNEL_HOST": "10.0.0.1",
        "VLLM_NIXL_SIDE_CHANNEL_PORT": str(prefill.port + 16),  # type: ignore[operator]
    }
    assert router.engine == "vllm-router"
    assert router.argv[3:] == [
        "--host", "10.0.0.1", "--port", "8000", "--vllm-pd-disaggregation",
        "--prefill", "http://10.0.0.1:8032", "--decode", "http://10.0.0.1:8064",
        "--kv-connector", "nixl", "--policy", "cache_aware", "--disable-circuit-breaker",
        "--health-check-interval-secs", "10", "--prometheus-host", "10.0.0.1",
        "--prometheus-port", "8001",
    ]  # fmt: skip


def test_probes_and_metric_names(repo: Repo) -> None:
    unit = units_of(repo, recipe(), fleet())[0]
    assert unit.readiness == unit.health == vllm.health()
    assert unit.health is not None and (unit.health.path, unit.health.status) == ("/health", 200)
    assert unit.metrics is not None and unit.metrics.port == unit.port
    assert unit.metrics.running == "vllm:num_requests_running"
    assert card("vllm").ALARM_SERIES.metrics["ttft"].name == "vllm:time_to_first_token_seconds"
