"""What a replace changes, named as an operator reads it: flags, settings inside the
simulator's spec, GPUs, port, and the environment when nothing else differs."""

from __future__ import annotations

import json

import pytest

from reconciler.engines.units import Unit
from reconciler.fleet.model.observed import UnitRecord
from reconciler.reconcile.changes import COMMAND, argv_changes, split_argv, unit_changes


@pytest.mark.parametrize(
    ("argv", "split"),
    [
        (["vllm", "serve", "m"], {COMMAND: "vllm serve m"}),
        (
            ["vllm", "serve", "--max-num-seqs", "128", "--enforce-eager", "--seed=3"],
            {COMMAND: "vllm serve", "--max-num-seqs": "128", "--enforce-eager": "", "--seed": "3"},
        ),
        (["r", "--worker-urls", "a", "b"], {COMMAND: "r", "--worker-urls": "a b"}),
        (
            ["r", "--prefill", "a", "1", "--prefill", "b", "2"],
            {COMMAND: "r", "--prefill": "a 1 | b 2"},
        ),
        (["x", "--offset", "-1"], {COMMAND: "x", "--offset": "-1"}),
    ],
    ids=["command-only", "values-switches-equals", "many-values", "repeated", "negative"],
)
def test_argv_is_read_as_command_and_flags(argv: list[str], split: dict[str, str]) -> None:
    assert split_argv(argv) == split


SPEC_OLD = json.dumps({"recipe": {"settings": {"max_batch": 128, "cuda_graphs": True}}, "gpus": 1})
SPEC_NEW = json.dumps({"recipe": {"settings": {"max_batch": 256, "cuda_graphs": True}}, "gpus": 1})


@pytest.mark.parametrize(
    ("old", "new", "changes"),
    [
        (["v", "--a", "1"], ["v", "--a", "2"], [("--a", "1", "2")]),
        (["v"], ["v", "--enforce-eager"], [("--enforce-eager", None, "")]),
        (["v", "--b", "x"], ["v"], [("--b", "x", None)]),
        (
            ["python3", "-m", "x"],
            ["/usr/bin/python3", "-m", "x"],
            [(COMMAND, "python3", "/usr/bin/python3")],
        ),
        (
            ["sim", "--spec-json", SPEC_OLD],
            ["sim", "--spec-json", SPEC_NEW],
            [("--spec-json recipe.settings.max_batch", "128", "256")],
        ),
    ],
    ids=["value", "added", "removed", "command", "json-setting"],
)
def test_argv_changes_name_the_flag(
    old: list[str], new: list[str], changes: list[tuple[str, str | None, str | None]]
) -> None:
    assert [(c.name, c.old, c.new) for c in argv_changes(old, new)] == changes


def _unit(gpus: list[int], port: int | None, argv: list[str]) -> Unit:
    return Unit(
        name="aggregated-0",
        role="aggregated",
        replica=0,
        node=0,
        engine="vllm",
        host="h",
        address="h",
        argv=argv,
        env={"CUDA_VISIBLE_DEVICES": ",".join(map(str, gpus))},
        port=port,
        gpus=len(gpus),
        gpu_indices=gpus,
    )


def test_gpus_port_and_otherwise_the_environment() -> None:
    record = UnitRecord(id="u", digest="old", argv=("v", "--a", "1"), port=8032, gpus=(0, 1))
    moved = unit_changes(record, _unit([2, 3], 8064, ["v", "--a", "1"]))
    assert [(c.field, c.old, c.new) for c in moved] == [
        ("gpus", "0,1", "2,3"),
        ("port", "8032", "8064"),
    ]
    same = unit_changes(record, _unit([0, 1], 8032, ["v", "--a", "1"]))
    assert [c.field for c in same] == ["env"]  # the digest differs, and nothing else does
