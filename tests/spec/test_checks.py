"""Every cross-file check, on a copy of this repository with one thing broken."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.spec.loader import open_repo
from tests.conftest import Edit

RELEASE = "releases/chat-8b/denv.yaml"
RECIPE = "recipes/llama-3.1-8b/vllm@1.yaml"


def test_the_repository_is_valid(denv_repo: Path) -> None:
    repo = open_repo(denv_repo)
    assert repo.errors == []
    assert repo.releases and repo.recipes and repo.fleets and repo.hardware


CASES = [
    pytest.param(
        RECIPE,
        "id: llama-3.1-8b/vllm@1",
        "id: llama-3.1-8b/vllm@2",
        RECIPE,
        "does not match its path",
        id="recipe-id-matches-path",
    ),
    pytest.param(
        RELEASE,
        "recipe: llama-3.1-8b/vllm@1",
        "recipe: llama-3.1-8b/vllm@9",
        RELEASE,
        "unknown recipe 'llama-3.1-8b/vllm@9'",
        id="release-recipe-exists",
    ),
    pytest.param(
        RELEASE,
        "fleets: [local]\n    bake: 10m",
        "fleets: [nowhere]\n    bake: 10m",
        RELEASE,
        "unknown fleet 'nowhere'",
        id="stage-fleet-exists",
    ),
    pytest.param(
        RELEASE,
        "alarms: [ttft-p99-1.5s, errors-1pct]",
        "alarms: [ttft-p99-9s]",
        RELEASE,
        "unknown alarm 'ttft-p99-9s'",
        id="alarm-exists",
    ),
    pytest.param(
        RELEASE,
        "    approvals: 1\n",
        "    approvals: 1\n    recipes: { local: x/y@1 }\n",
        RELEASE,
        "unknown recipe 'x/y@1'",
        id="per-fleet-recipe-exists",
    ),
    pytest.param(
        RELEASE,
        "    approvals: 1\n",
        "    approvals: 1\n    recipes: { local: llama-3.1-70b/vllm@1 }\n",
        RELEASE,
        "serves llama-3.1-70b, the release serves llama-3.1-8b",
        id="per-fleet-recipe-same-model",
    ),
    pytest.param(
        RELEASE,
        "    approvals: 1\n",
        "    approvals: 1\n    recipes: { h200-use1: llama-3.1-8b/sglang@1 }\n",
        RELEASE,
        "fleet 'h200-use1' is not one of the stage's fleets",
        id="per-fleet-recipe-names-a-stage-fleet",
    ),
    pytest.param(
        RELEASE,
        "settings: { max_batch: 128 }",
        "settings: { max_batchez: 128 }",
        RELEASE,
        "unknown field 'max_batchez'",
        id="override-unknown-field",
    ),
    pytest.param(
        RELEASE,
        "settings: { max_batch: 128 }",
        "topology: { gpus: 2 }",
        RELEASE,
        "'topology' cannot be overridden",
        id="override-not-overridable",
    ),
    pytest.param(
        RELEASE,
        "settings: { max_batch: 128 }",
        "settings: { max_batch: lots }",
        RELEASE,
        "release.overrides.settings.max_batch",
        id="override-bad-value",
    ),
    pytest.param(
        RELEASE,
        "replicas: 2, gpus: 1, parallel: { tp: 1 }",
        "replicas: 1, gpus: 16, parallel: { tp: 16 }",
        RELEASE,
        "needs 16 GPUs in one domain; the largest domain of local has 8",
        id="replica-fits-one-domain",
    ),
    pytest.param(
        RELEASE,
        "replicas: 2, gpus: 1, parallel: { tp: 1 }",
        "replicas: 3, gpus: 4, parallel: { tp: 4 }",
        RELEASE,
        "needs 12 GPUs; local has 8 for serving",
        id="fleet-has-the-gpus",
    ),
    pytest.param(
        RELEASE,
        "@0e9e39f249a16976918f6564b8830bc894c89659",
        "",
        RELEASE,
        "not pinned to a commit",
        id="weights-pinned",
    ),
    pytest.param(
        RELEASE,
        "  - name: prod",
        "  - name: canary",
        RELEASE,
        "'canary' is used by more than one stage",
        id="stage-names-unique",
    ),
    pytest.param(
        "fleets/local.yaml",
        "name: local\n",
        "name: locale\n",
        "fleets/local.yaml",
        "does not match its file name",
        id="fleet-name-matches-file",
    ),
    pytest.param(
        "fleets/local.yaml",
        "hardware: h200",
        "hardware: h900",
        "fleets/local.yaml",
        "unknown hardware 'h900'",
        id="fleet-hardware-exists",
    ),
    pytest.param(
        RECIPE,
        "model: llama-3.1-8b",
        "model: llama-9",
        RECIPE,
        "unknown model 'llama-9'",
        id="recipe-model-exists",
    ),
    pytest.param(
        "fleets/local.yaml",
        "hardware: h200",
        "hardware: mi300x",
        RELEASE,
        "is for",
        id="recipe-hardware-matches-fleet",
    ),
]


@pytest.mark.parametrize(("path", "old", "new", "where", "message"), CASES)
def test_cross_file_check(
    denv_repo: Path, edit: Edit, path: str, old: str, new: str, where: str, message: str
) -> None:
    edit(path, old, new)
    repo = open_repo(denv_repo)
    found = [p for p in repo.errors if message in p.message]
    assert found, [str(p) for p in repo.problems]
    assert found[0].path == where
    text = (denv_repo / where).read_text().splitlines()
    assert 1 <= found[0].line <= len(text)


def test_weights_pin_is_a_warning_when_the_policy_allows(denv_repo: Path, edit: Edit) -> None:
    edit(RELEASE, "@0e9e39f249a16976918f6564b8830bc894c89659", "")
    edit("policies/gates.yaml", "require_pinned_weights: true", "require_pinned_weights: false")
    repo = open_repo(denv_repo)
    assert repo.errors == []
    assert any("not pinned" in p.message and p.warning for p in repo.problems)


def test_promotions_name_later_stages(denv_repo: Path) -> None:
    (denv_repo / "releases/chat-8b/promotions.yaml").write_text(
        "promotions:\n  canary: { revision: " + "a" * 40 + " }\n"
    )
    repo = open_repo(denv_repo)
    assert [str(p) for p in repo.errors] == [
        "releases/chat-8b/promotions.yaml:2:3: promotions.canary: not a later stage of chat-8b "
        "(later stages: prod)"
    ]


def test_error_names_line_and_field(denv_repo: Path, edit: Edit) -> None:
    edit("fleets/local.yaml", "trial_gpus: 8", "trial_gpus: eight")
    repo = open_repo(denv_repo)
    lines = (denv_repo / "fleets/local.yaml").read_text().splitlines()
    line = next(i for i, text in enumerate(lines, 1) if "trial_gpus" in text)
    assert [str(p) for p in repo.errors] == [
        f"fleets/local.yaml:{line}:15: fleet.trial_gpus: Input should be a valid integer, unable "
        "to parse string as an integer (got 'eight')"
    ]
