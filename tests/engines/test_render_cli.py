"""`denv recipe render` as a user runs it: what would run, as text or JSON; refusals are one
line on stderr and exit 1, never a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, Edit

UNIT_KEYS = {"name", "role", "replica", "node", "argv", "env", "gpus", "port"}


def denv(*args: str, repo: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "reconciler", *args, "--repo", str(repo)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_json_lists_every_unit() -> None:
    run = denv("recipe", "render", "llama-3.1-70b/vllm@1", "--json")
    assert run.returncode == 0, run.stderr
    units = json.loads(run.stdout)["units"]
    assert all(set(unit) >= UNIT_KEYS for unit in units)
    engine, router = units
    assert engine["argv"][:3] == ["vllm", "serve", "meta-llama/Llama-3.1-70B-Instruct"]
    assert "--tensor-parallel-size" in engine["argv"]
    assert (engine["gpus"], engine["env"]) == (4, {"CUDA_VISIBLE_DEVICES": "0,1,2,3"})
    assert (router["role"], router["gpus"], router["port"]) == ("router", 0, 8000)


def test_release_renders_its_first_stage_on_the_simulated_fleet() -> None:
    run = denv("recipe", "render", "llama-3.1-8b/vllm@1", "--release", "chat-8b", "--json")
    assert run.returncode == 0, run.stderr
    units = json.loads(run.stdout)["units"]
    assert [u["name"] for u in units] == ["aggregated-0", "aggregated-1", "router"]
    assert units[0]["argv"][1:5] == ["-m", "reconciler", "sim", "serve"]
    spec = json.loads(units[0]["argv"][units[0]["argv"].index("--spec-json") + 1])
    assert (spec["served_model"], spec["recipe"]["settings"]["max_batch"]) == ("chat-8b", 128)


def test_text_shows_each_unit_as_a_command_line() -> None:
    run = denv("recipe", "render", "llama-3.1-70b/sglang@1")
    assert run.returncode == 0, run.stderr
    assert "llama-3.1-70b/sglang@1 — fleet h200-use1 (h200) — sglang, 2 units, 2 GPUs" in run.stdout
    assert (
        "CUDA_VISIBLE_DEVICES=0,1 python3 -m sglang.launch_server --model-path "
        "meta-llama/Llama-3.1-70B-Instruct --served-model-name llama-3.1-70b" in run.stdout
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(
            ["llama-3.1-70b/vllm-disagg@1", "--fleet", "h200-use1"],
            "prefill replica 0 needs 4 GPUs in one domain; the most free in one domain of "
            "h200-use1 is 0 (others are in use, busy with foreign processes, or kept as the "
            "fleet's 8 trial GPUs) (and 1 more replica(s) do not fit)",
            id="no-room",
        ),
        pytest.param(
            ["deepseek-r1/sglang-fp8-b200-tp8@1"],
            "no fleet has b200 for deepseek-r1/sglang-fp8-b200-tp8@1 (fleets: gb200-rack "
            "(gb200-nvl72), h200-use1 (h200), local (h200)); pass --fleet",
            id="no-fleet",
        ),
        pytest.param(
            ["deepseek-r1/sglang-fp8-b200-tp8@1", "--fleet", "h200-use1"],
            "deepseek-r1/sglang-fp8-b200-tp8@1 is for b200, h200-use1 has h200 (a simulated "
            "fleet runs any recipe)",
            id="wrong-hardware",
        ),
        pytest.param(
            ["llama-3.1-8b/sglang@1", "--release", "chat-8b"],
            "release chat-8b does not run llama-3.1-8b/sglang@1 (it runs llama-3.1-8b/vllm@1 on "
            "local in canary, llama-3.1-8b/vllm@1 on local in prod)",
            id="not-the-release-recipe",
        ),
    ],
)
def test_refusals_exit_1_with_the_message(args: list[str], message: str) -> None:
    run = denv("recipe", "render", *args)
    assert (run.returncode, run.stderr.strip(), run.stdout) == (1, message, "")


def test_unknown_extra_arg_is_refused(denv_repo: Path, edit: Edit) -> None:
    edit(
        "recipes/llama-3.1-8b/vllm@1.yaml",
        "    parallel: {tp: 1, ep: 1, dp: 1}\n",
        "    parallel: {tp: 1, ep: 1, dp: 1}\n  args: [--max-num-seq, '8']\n",
    )
    run = denv("recipe", "render", "llama-3.1-8b/vllm@1", "--fleet", "h200-use1", repo=denv_repo)
    assert run.returncode == 1
    assert run.stderr.strip() == (  # refused where it is written, as `denv validate` does
        "recipes/llama-3.1-8b/vllm@1.yaml:12:10: recipe.args[0]: --max-num-seq is not a flag of "
        "vllm 0.33.0 (did you mean --max-num-seqs? denv sets it from settings.max_batch)"
    )
    assert "Traceback" not in run.stderr


def test_unsupported_setting_is_refused(denv_repo: Path, edit: Edit) -> None:
    edit(
        "recipes/llama-3.1-8b/vllm@1.yaml",
        "    parallel: {tp: 1, ep: 1, dp: 1}\n",
        "    parallel: {tp: 1, ep: 1, dp: 1}\n  settings: {quantization: w8a8_fp8}\n",
    )
    run = denv("recipe", "render", "llama-3.1-8b/vllm@1", "--fleet", "h200-use1", repo=denv_repo)
    assert run.returncode == 1
    assert run.stderr.strip() == (
        "settings.quantization w8a8_fp8 is not supported on vllm 0.33.0: vLLM has no w8a8_fp8 "
        "method; FP8 checkpoints load with quantization fp8"
    )


HPC = """fleet:
  name: hpc
  provider: test
  hardware: h200
  simulated: true
  transport: slurm
  slurm: {partition: gpu, time_limit: "2-00:00:00", trial_partition: scavenge, qos: serve}
  hosts:
    - {name: login1, address: 10.0.0.1, gpus: 0}
    - {name: node1, address: 10.0.0.2, gpus: 8}
"""


def test_a_slurm_fleet_shows_each_job_sbatch_line(denv_repo: Path, edit: Edit) -> None:
    (denv_repo / "fleets/hpc.yaml").write_text(HPC)
    edit("releases/chat-8b/denv.yaml", "canary\n    fleets: [local]", "canary\n    fleets: [hpc]")
    serving = denv(
        "recipe", "render", "llama-3.1-8b/vllm@1", "--release", "chat-8b", repo=denv_repo
    )
    assert serving.returncode == 0, serving.stderr
    lines = serving.stdout.splitlines()
    job = (
        "  sbatch --job-name aggregated-0 --partition gpu --nodes 1 --nodelist node1 "
        "--ntasks-per-node 1 --qos serve --time 2-00:00:00 --gres=gpu:1"
    )
    assert job in lines
    assert lines[lines.index(job) - 1].startswith("aggregated-0  sim  node1")
    assert sum(line.startswith("  sbatch ") for line in lines) == 2  # a job per replica
    router = next(i for i, line in enumerate(lines) if line.startswith("router "))
    assert "sbatch" not in lines[router + 1]  # the login node's router runs as a process

    trial = denv(
        "recipe", "render", "llama-3.1-8b/vllm@1", "--fleet", "hpc", "--json", repo=denv_repo
    )
    engine, router = json.loads(trial.stdout)["units"]
    assert engine["sbatch"][:5] == [
        "sbatch",
        "--job-name",
        "aggregated-0",
        "--partition",
        "scavenge",
    ]
    assert "--time" not in engine["sbatch"] and "sbatch" not in router
    text = denv("recipe", "render", "llama-3.1-8b/vllm@1", "--fleet", "hpc", repo=denv_repo).stdout
    assert "--gres=gpu:1  # time limit: the partition's default" in text
