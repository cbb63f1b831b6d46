"""Elastic stages in the spec: replica bounds on a stage or a release, the scaling policies of
policies/scaling.yaml, and what `denv validate` says when they are wrong (file, line, field;
exit 1)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reconciler.spec.loader import open_repo
from reconciler.spec.scaling import ReplicaBounds
from tests.cli.test_validate import denv
from tests.conftest import Edit

RELEASE = "releases/chat-8b/denv.yaml"
CANARY = "    fleets: [local]\n    bake: 10m\n"
PROD = "    fleets: [local]\n    bake: 30m\n"


def problems(repo_path: Path) -> list[str]:
    return [f"{p.path}:{p.line}: {p.message}" for p in open_repo(repo_path).errors]


def test_bounds_on_a_stage_and_on_the_release(denv_repo: Path, edit: Edit) -> None:
    edit(RELEASE, "  recipe: llama-3.1-8b/vllm@1\n", "  recipe: llama-3.1-8b/vllm@1\n"
         "  replicas: { min: 1, max: 4 }\n")  # fmt: skip
    edit(
        RELEASE,
        CANARY,
        CANARY.replace("bake", "replicas: { min: 2, max: 8, policy: fast }\n    bake"),
    )
    (denv_repo / "policies/scaling.yaml").write_text(
        "scaling:\n  fast:\n    interval: 0s\n    down: { delay: 3s, drain_grace: 5s }\n"
    )
    repo = open_repo(denv_repo)
    assert repo.errors == []
    release = repo.releases["chat-8b"]
    canary, prod = release.stages
    assert release.bounds_for(canary) == ReplicaBounds(min=2, max=8, policy="fast")
    assert release.bounds_for(prod) == ReplicaBounds(min=1, max=4)  # the release's
    fast = repo.policies.scaling["fast"]
    assert (fast.interval, fast.down.delay, fast.down.drain_grace) == (0, 3, 5)
    assert fast.up.step == 4  # left out: the defaults
    assert "default" in repo.policies.scaling  # always there, even when the file omits it


CASES = [
    pytest.param(
        RELEASE, CANARY, CANARY.replace("bake", "replicas: { min: 3, max: 1 }\n    bake"),
        f"{RELEASE}:13: stages[0].replicas: min 3 is more than max 1",
        id="min-over-max",
    ),
    pytest.param(
        RELEASE, PROD, PROD.replace("bake", "replicas: { min: 1, max: 3, policy: nope }\n    bake"),
        f"{RELEASE}:17: stages[1].replicas.policy: unknown scaling policy 'nope' (known: "
        "default; policies/scaling.yaml)",
        id="unknown-policy",
    ),
    pytest.param(
        RELEASE, "  recipe: llama-3.1-8b/vllm@1\n",
        "  recipe: llama-3.1-8b/vllm@1\n  replicas: { min: 0, max: 2 }\n",
        f"{RELEASE}:7: release.replicas.min: Input should be greater than 0",
        id="min-zero",
    ),
    pytest.param(
        RELEASE, PROD,
        "    fleets: [local, h200-use1]\n    replicas: { min: 1, max: 4, pool: stage }\n"
        "    bake: 30m\n",
        f"{RELEASE}:17: stages[1].replicas.min: 1 is fewer than stage prod's 2 fleets (pool: "
        "stage keeps a replica on each)",
        id="pool-min-under-fleets",
    ),
    pytest.param(
        "policies/scaling.yaml", "      drain_grace: 60s",
        "      drain_grace: 60s\n      grace: 5s",
        "policies/scaling.yaml:22: scaling.default.down.grace: unknown field",
        id="policy-unknown-field",
    ),
    pytest.param(
        "policies/scaling.yaml", "target_utilization: 0.7 ", "target_utilization: 1.5 ",
        "policies/scaling.yaml:9: scaling.default.target_utilization: Input should be less than "
        "or equal to 1",
        id="policy-utilization",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("path", "old", "new", "wanted"), CASES)
def test_a_bad_bound_or_policy_names_its_file_line_and_field(
    denv_repo: Path, edit: Edit, path: str, old: str, new: str, wanted: str
) -> None:
    edit(path, old, new)
    assert problems(denv_repo) == [wanted]


def test_bounds_on_a_disaggregated_recipe_are_refused(denv_repo: Path, edit: Edit) -> None:
    edit(RELEASE, "  recipe: llama-3.1-8b/vllm@1\n", "  recipe: llama-3.1-70b/vllm-disagg@1\n"
         "  replicas: { min: 1, max: 4 }\n")  # fmt: skip
    edit(RELEASE, "  overrides:\n    settings: { max_batch: 128 }\n", "")
    edit(
        RELEASE, "  topology: { mode: aggregated, replicas: 2, gpus: 1, parallel: { tp: 1 } }\n", ""
    )
    found = [p for p in problems(denv_repo) if "replica bounds" in p]
    assert (
        found
        == [
            f"{RELEASE}:7: release.replicas: replica bounds scale an aggregated topology; "
            "llama-3.1-70b/vllm-disagg@1 is disaggregated (give prefill and decode replicas)"
        ]
        * 2
    )  # one per stage that takes the release's bounds


def test_validate_exits_1_naming_line_and_column(denv_repo: Path, edit: Edit) -> None:
    edit(RELEASE, CANARY, CANARY.replace("bake", "replicas: { min: 3, max: 1 }\n    bake"))
    edit(
        "policies/scaling.yaml", "      drain_grace: 60s", "      drain_grace: 60s\n      grace: 5s"
    )
    run = denv("validate", str(denv_repo))
    assert run.returncode == 1 and "Traceback" not in run.stderr, run.stderr
    assert run.stderr.splitlines() == [
        "policies/scaling.yaml:22:14: scaling.default.down.grace: unknown field",
        f"{RELEASE}:13:5: stages[0].replicas: min 3 is more than max 1",
    ]


def test_schema_lists_the_scaling_kind(tmp_path: Path) -> None:
    run = denv("schema", "--json")
    assert run.returncode == 0, run.stderr
    kinds = json.loads(run.stdout)
    assert kinds["scaling"]["title"].startswith("denv"), kinds["scaling"]["title"]
    policy = kinds["scaling"]["$defs"]["ScalingPolicy"]["properties"]
    assert {"interval", "window", "up", "down", "target_utilization"} <= set(policy)
    release = kinds["release"]["$defs"]["ReplicaBounds"]["properties"]
    assert set(release) == {"min", "max", "policy", "pool"}
