"""`denv validate` and `denv schema` as a user runs them: exit codes, messages, no tracebacks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, Edit


def denv(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "reconciler", *args],
        capture_output=True,
        text=True,
        cwd=cwd or ROOT,
        timeout=60,
    )


def test_clean_repository_exits_0_with_a_summary(denv_repo: Path) -> None:
    run = denv("validate", str(denv_repo))
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("ok: ")
    assert "recipes" in run.stdout and len(run.stdout.splitlines()) == 1


HOSTILE = {
    "fleets/local.yaml": b"fleet:\n  name: local\n\tprovider: x\n",
    "fleets/h200-use1.yaml": b"fleet: &a [*a]\n",
    "policies/alarms.yaml": b"alarms:\n  x: { metric: ttft }\n  x: { metric: itl }\n",
    "catalog/offers.yaml": b"offers: caf\xc3\x28\n",
    "releases/chat-8b/denv.yaml": b"release: " + b"[" * 100 + b"]" * 100 + b"\n",
    "fleets/gb200-rack.yaml": b"fleet:\n  name: gb200-rack\n  colour: blue\n",
}


def test_every_error_at_once_one_per_line_exit_1(denv_repo: Path) -> None:
    for path, data in HOSTILE.items():
        (denv_repo / path).write_bytes(data)
    run = denv("validate", str(denv_repo))
    assert run.returncode == 1
    assert "Traceback" not in run.stderr
    lines = run.stderr.splitlines()
    for path in HOSTILE:
        assert any(line.startswith(f"{path}:") for line in lines), (path, lines)
    for line in lines:
        path, row, col, message = line.split(":", 3)
        assert row.isdigit() and col.isdigit() and message.strip(), line


SLURM_HOSTS = "  hosts:\n    - { name: login, gpus: 0 }\n    - { name: n1, gpus: 4 }\n"
BAD_SLURM = {  # file -> (its text, the field named, the line of the field)
    "no-block": ("  transport: slurm\n" + SLURM_HOSTS, "fleet.transport", 5),
    "no-login": (
        "  transport: slurm\n  slurm: { partition: gpu }\n  hosts:\n    - { name: n1, gpus: 4 }\n",
        "fleet.hosts",
        7,
    ),
    "gpu-request": (
        "  transport: slurm\n  slurm: { partition: gpu, gpu_request: tres }\n" + SLURM_HOSTS,
        "fleet.slurm.gpu_request",
        6,
    ),
    "on-ssh": (
        "  ssh: { user: denv }\n  slurm: { partition: gpu }\n" + SLURM_HOSTS,
        "fleet.slurm",
        6,
    ),
}


def test_bad_slurm_fleets_name_file_line_and_field_exit_1(denv_repo: Path) -> None:
    for name, (body, _, _) in BAD_SLURM.items():
        head = f"fleet:\n  name: {name}\n  provider: test\n  hardware: h200\n"
        (denv_repo / f"fleets/{name}.yaml").write_text(head + body)
    run = denv("validate", str(denv_repo))
    assert run.returncode == 1 and "Traceback" not in run.stderr
    for name, (_, field, line) in BAD_SLURM.items():
        (problem,) = [p for p in run.stderr.splitlines() if p.startswith(f"fleets/{name}.yaml:")]
        assert problem.startswith(f"fleets/{name}.yaml:{line}:") and f": {field}: " in problem


def test_json_output_lists_problems(denv_repo: Path, edit: Edit) -> None:
    edit("fleets/local.yaml", "trial_gpus: 8", "trial_gpus: 80")
    run = denv("validate", str(denv_repo), "--json")
    assert run.returncode == 1
    report = json.loads(run.stdout)
    assert report["ok"] is False
    assert report["problems"][0]["path"] == "fleets/local.yaml"
    assert "exceeds the fleet's 16 GPUs" in report["problems"][0]["message"]


def test_missing_repository_is_a_message_not_a_traceback(tmp_path: Path) -> None:
    run = denv("validate", str(tmp_path))
    assert run.returncode == 1
    assert "no denv repository" in run.stderr and "Traceback" not in run.stderr


def test_schema_writes_one_file_per_kind_and_repo_schemas_are_current(tmp_path: Path) -> None:
    run = denv("schema", "--out", str(tmp_path))
    assert run.returncode == 0, run.stderr
    written = sorted(p.name for p in tmp_path.iterdir())
    assert "recipe.schema.json" in written and "release.schema.json" in written
    for name in written:  # `make schemas` regenerates these; the repo's must match
        assert (ROOT / "schemas" / name).read_text() == (tmp_path / name).read_text(), name


@pytest.mark.parametrize(
    "path",
    sorted(
        str(p.relative_to(ROOT))
        for top in ("catalog", "recipes", "fleets", "releases", "policies")
        for p in (ROOT / top).rglob("*.yaml")
    ),
)
def test_repo_yaml_names_its_schema(path: str) -> None:
    first = (ROOT / path).read_text().splitlines()[0]
    assert first.startswith("# yaml-language-server: $schema=")
    schema = (ROOT / path).parent / first.split("$schema=", 1)[1]
    assert schema.resolve().is_file(), schema


@pytest.mark.parametrize(
    ("path", "old", "new", "message"),
    [
        pytest.param(
            "releases/chat-8b/denv.yaml",
            "settings: { max_batch: 128 }",
            "settings: { max_batch: 128 }\n    engine: { version: 0.11.0 }",
            "release.overrides.engine.version: vllm 0.11.0 has no flag table in denv "
            "(it knows vllm 0.32.0, 0.33.0); the nearest it could use is 0.32.0",
            id="release-override",
        ),
        pytest.param(
            "recipes/llama-3.1-8b/sglang@1.yaml",
            "version: 0.5.23",
            "version: 0.4.10",
            "recipe.engine.version: sglang 0.4.10 has no flag table in denv (it knows sglang "
            "0.5.8, 0.5.9, 0.5.12, 0.5.16, 0.5.23); the nearest it could use is 0.5.8",
            id="recipe",
        ),
    ],
)
def test_an_engine_version_without_a_flag_table_is_refused_at_its_line(
    denv_repo: Path, edit: Edit, path: str, old: str, new: str, message: str
) -> None:
    edit(path, old, new)
    before = (denv_repo / path).read_bytes()
    run = denv("validate", str(denv_repo))
    assert run.returncode == 1 and "Traceback" not in run.stderr
    lines = (denv_repo / path).read_text().splitlines()
    line = next(n for n, text in enumerate(lines, 1) if new.splitlines()[-1].strip() in text)
    (problem,) = [p for p in run.stderr.splitlines() if message in p]
    assert problem.startswith(f"{path}:{line}:")
    assert (denv_repo / path).read_bytes() == before


ARGS_LINE = "  description: Llama-3.1-8B-Instruct"


@pytest.mark.parametrize(
    ("path", "old", "new", "at", "message"),
    [
        pytest.param(
            "recipes/llama-3.1-8b/vllm@1.yaml",
            ARGS_LINE,
            "  args:\n    - --trust-remote-code\n    - --port=9000\n" + ARGS_LINE,
            "- --port=9000",
            "recipe.args[1]: --port is set by denv from placement; change that instead of "
            "passing the flag",
            id="managed-flag",
        ),
        pytest.param(
            "recipes/llama-3.1-8b/sglang@1.yaml",
            "  hardware:",
            '  args:\n    - --cuda-graph-max-bs\n    - "128"\n  hardware:',
            "- --cuda-graph-max-bs",
            "recipe.args[0]: --cuda-graph-max-bs is not a flag of sglang 0.5.23 (did you mean "
            "--cuda-graph-max-bs-decode?)",
            id="flag-gone-in-this-version",
        ),
        pytest.param(
            "releases/chat-8b/denv.yaml",
            "settings: { max_batch: 128 }",
            'settings: { max_batch: 128 }\n    args: ["--max-num-seqs", "64"]',
            "args:",
            "release.overrides.args[0]: --max-num-seqs is set by denv from settings.max_batch; "
            "change that instead of passing the flag (on vllm 0.33.0, recipe llama-3.1-8b/vllm@1)",
            id="release-override",
        ),
    ],
)
def test_recipe_args_the_engine_would_refuse_are_refused_at_their_line(
    denv_repo: Path, edit: Edit, path: str, old: str, new: str, at: str, message: str
) -> None:
    """What rendering would refuse at plan time, validate refuses first, at the element."""
    edit(path, old, new)
    run = denv("validate", str(denv_repo))
    assert run.returncode == 1 and "Traceback" not in run.stderr
    lines = (denv_repo / path).read_text().splitlines()
    line = next(n for n, text in enumerate(lines, 1) if at in text)
    (problem,) = [p for p in run.stderr.splitlines() if message in p]
    assert problem.startswith(f"{path}:{line}:"), problem


def test_shell_metacharacters_in_args_are_a_warning_that_no_shell_runs_them(
    denv_repo: Path, edit: Edit
) -> None:
    path = "recipes/llama-3.1-8b/vllm@1.yaml"
    edit(path, ARGS_LINE, '  args: ["--api-key", "$(cat /run/secrets/key)"]\n' + ARGS_LINE)
    run = denv("validate", str(denv_repo), "--json")
    assert run.returncode == 0, run.stdout
    report = json.loads(run.stdout)
    (problem,) = [p for p in report["problems"] if p["path"] == path]
    assert problem["warning"] is True and problem["line"] == 12
    assert problem["message"].startswith('recipe.args[1]: "$(cat /run/secrets/key)" holds "$("')
    assert "args are never run by a shell" in problem["message"]
