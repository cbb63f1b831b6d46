"""Runtimes: the argv a unit runs with in a container or a per-version environment, compared
with golden files for NVIDIA and AMD, aggregated and multi-node recipes."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.engines.runtime import HostRuntime, choose_runtime, in_runtime, module_argv
from reconciler.errors import EngineError
from reconciler.spec.repo import Repo
from tests.engines.golden import check_golden
from tests.engines.test_golden import golden_units

CASES = [
    "llama-3.1-8b/vllm@1",  # NVIDIA, aggregated, one GPU
    "deepseek-r1/sglang-fp4-mi355x-tp8@1",  # AMD
    "deepseek-r1/sglang-fp8-gb200-nvl72-2p-tp8-ep8-dpa-1d-tp32-ep32-dpa@1",  # multi-node P/D
]
HOME = "/home/denv/.denv"
WEIGHTS = "/home/denv/.denv/weights/0123456789abcdef"


def runtime(kind: str, vendor: str) -> HostRuntime:
    engine = "docker" if kind == "container" else None
    return HostRuntime(kind=kind, home=HOME, container_engine=engine, vendor=vendor)  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", ["container", "venv"])
@pytest.mark.parametrize("recipe_id", CASES)
def test_runtime_argv_matches_golden(repo: Repo, recipe_id: str, kind: str) -> None:
    spec = repo.recipes[recipe_id]
    vendor = repo.resolve_hardware(spec.hardware[0]).vendor  # type: ignore[union-attr]
    rendered: list[dict[str, Any]] = []
    for unit in golden_units(repo, spec):
        runnable = in_runtime(
            unit,
            f"rel.stage.{unit.name}",
            spec.engine.version,
            runtime(kind, vendor),
            spec.engine.image,
            WEIGHTS,
        )
        rendered.append(
            {
                "name": unit.name,
                "argv": runnable.unit.argv,
                "cleanup": runnable.cleanup,
                "need": runnable.need.model_dump(mode="json") if runnable.need else None,
            }
        )
    check_golden(f"runtime/{kind}/{recipe_id.replace('/', '__')}.json", rendered)


def test_container_gpus_and_devices(repo: Repo) -> None:
    nvidia = golden_units(repo, repo.recipes["llama-3.1-8b/vllm@1"])[0]
    argv = in_runtime(
        nvidia, "u", "0.33.0", runtime("container", "nvidia"), None, WEIGHTS
    ).unit.argv
    assert argv[argv.index("--gpus") + 1] == '"device=0"'
    assert "CUDA_VISIBLE_DEVICES=0" not in argv  # --gpus renumbers the GPUs inside
    assert f"{WEIGHTS}:{WEIGHTS}:ro" in argv
    assert argv[argv.index("--name") + 1] == "denv-u"
    amd = golden_units(repo, repo.recipes["deepseek-r1/sglang-fp4-mi355x-tp8@1"])[0]
    with pytest.raises(EngineError, match=r"engine\.image"):
        in_runtime(amd, "u", "0.5.23", runtime("container", "amd"), None, WEIGHTS)
    rocm = "lmsysorg/sglang:v0.5.23-rocm700-mi35x"
    argv = in_runtime(amd, "u", "0.5.23", runtime("container", "amd"), rocm, WEIGHTS).unit.argv
    assert argv[argv.index("--device") : argv.index("--device") + 4] == [
        "--device",
        "/dev/kfd",
        "--device",
        "/dev/dri",
    ]
    assert "HIP_VISIBLE_DEVICES=0,1,2,3,4,5,6,7" in argv
    assert "--gpus" not in argv


def test_a_cpu_builds_container_is_held_to_its_cores_and_given_no_gpu_devices(repo: Repo) -> None:
    served = golden_units(repo, repo.recipes["llama-3.1-8b/vllm@1"])[0]
    on_cores = served.model_copy(update={"env": {}, "gpu_indices": [2, 3], "cpus": [2, 3]})
    image = "example.org/vllm-cpu:0.32.0"
    argv = in_runtime(on_cores, "u", "0.32.0", runtime("container", "cpu"), image).unit.argv
    assert argv[argv.index("--cpuset-cpus") + 1] == "2,3"
    assert "--gpus" not in argv and "--device" not in argv


def test_image_override_and_router_venv(repo: Repo) -> None:
    units = golden_units(repo, repo.recipes["llama-3.1-8b/vllm@1"])
    engine, router = units[0], units[-1]
    custom = in_runtime(engine, "u", "0.33.0", runtime("container", "nvidia"), "reg.io/vllm:x")
    assert custom.need is not None and custom.need.name == "reg.io/vllm:x"
    routed = in_runtime(router, "r", "0.33.0", runtime("container", "nvidia"))
    assert routed.need is not None and routed.need.kind == "venv"
    assert routed.unit.argv[0] == f"{HOME}/engines/sglang-router-0.3.2/bin/python"


def test_venv_runs_engines_as_modules() -> None:
    assert module_argv(["vllm", "serve", "m", "--port", "1"])[:3] == [
        "-m",
        "vllm.entrypoints.cli.main",
        "serve",
    ]
    assert module_argv(["python3", "-m", "sglang.launch_server", "--x"]) == [
        "-m",
        "sglang.launch_server",
        "--x",
    ]
    with pytest.raises(EngineError):
        module_argv(["/opt/bin/custom-engine", "--x"])


def test_choose_runtime() -> None:
    assert choose_runtime(None, False, "podman", HOME, "nvidia").kind == "container"
    assert choose_runtime(None, False, None, HOME, "nvidia").kind == "venv"
    assert choose_runtime("venv", False, "docker", HOME, "nvidia").kind == "venv"
    assert choose_runtime(None, True, "docker", HOME, "nvidia").kind == "sim"
    with pytest.raises(EngineError, match="neither docker nor podman"):
        choose_runtime("container", False, None, HOME, "nvidia")
