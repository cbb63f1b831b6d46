"""The rules of the trusted PR policy one by one, on a real repository: where weights may come
from (`file:////` and `..` refused before any root; `file://` and `s3://` only under the
trusted fleet's weights.roots, folder by folder; `hf://` only pinned to a full commit), which
engine flags a pull request's trial may not pass (named ones, every flag that takes a host
path, read off each engine's own flag table, and values naming host paths), that every text
field of a recipe or release is judged or listed as inert, and that a trial's prepare gets a
token only when the default branch's policy names its variable."""

from __future__ import annotations

import typing
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from reconciler.engines.cards import card
from reconciler.engines.pr_policy import pr_refusals
from reconciler.fleet.prepare import weights_request
from reconciler.forge.local import LocalForge
from reconciler.forge.trusted import trusted_ref
from reconciler.pr.plan import proposed, pull_request_source
from reconciler.spec.loader import open_repo
from reconciler.spec.pr_policy import RECIPE_INERT, RECIPE_JUDGED, RELEASE_INERT, RELEASE_JUDGED
from reconciler.spec.pr_rules import takes_host_path
from reconciler.spec.recipe import Recipe
from reconciler.spec.release import ReleaseBody
from tests.conftest import Edit
from tests.forge.conftest import git_repo
from tests.forge.gitrepo import commit_file
from tests.security.test_pr_policy import COMMIT, RECIPE, RELEASE, pull_request

__all__ = ["git_repo"]


@pytest.mark.parametrize(
    ("weights", "refused"),
    [
        ("file:////", "file://// is not a plain path (an empty, '.' or '..' component)"),
        (
            "file:///srv/models/../../home/denv/.ssh",
            "file:///srv/models/../../home/denv/.ssh is not a plain path",
        ),
        ("file:///srv/models//llama", "file:///srv/models//llama is not a plain path"),
        ("file:///srv/models-evil/llama", "file:///srv/models-evil/llama is under no weights"),
        ("file:///srv", "file:///srv is under no weights root of fleet local"),
        ("s3://models-bucket/llama-evil", "s3://models-bucket/llama-evil is under no weights"),
        ("s3://models-bucket/llama/../x", "s3://models-bucket/llama/../x is not a plain path"),
        (f"hf://meta-llama/Llama-3.1-8B-Instruct@{COMMIT[:7]}", "is not pinned to a full commit"),
        (f"hf://../..@{COMMIT}", "does not name a Hugging Face repository"),
        ("file:///srv/models/llama", None),
        ("file:///srv/models", None),
        ("s3://models-bucket/llama/8b", None),
        (f"hf://meta-llama/Llama-3.1-8B-Instruct@{COMMIT}", None),
    ],
)
def test_weights_come_only_from_pinned_hf_or_under_the_fleets_roots(
    denv_repo: Path, edit: Edit, weights: str, refused: str | None
) -> None:
    roots = "  weights: { roots: [file:///srv/models/, s3://models-bucket/llama] }\n"
    edit("fleets/local.yaml", "  trial_gpus: 8\n", "  trial_gpus: 8\n" + roots)
    text = (denv_repo / RELEASE).read_text()
    (denv_repo / RELEASE).write_text(
        text.replace(f"hf://meta-llama/Llama-3.1-8B-Instruct@{COMMIT}", weights)
    )
    repo = open_repo(denv_repo)
    assert [str(p) for p in repo.errors] == []

    found = [str(p) for p in pr_refusals(repo)]

    if refused is None:
        assert found == []
    else:
        [problem] = found
        assert problem.startswith(f"{RELEASE}:5:12: release.weights: ")
        assert refused in problem and problem.endswith("(pr policy rule weights)")


@pytest.mark.parametrize(
    ("hf_repo", "refused"),
    [
        ("meta-llama/x@main", "hf://meta-llama/x@main names a revision"),
        ("../../x", "does not name a Hugging Face repository"),
        ("meta-llama/Llama-3.1-70B-Instruct", None),
    ],
)
def test_a_catalog_models_hf_repo_names_a_repository_alone(
    denv_repo: Path, edit: Edit, hf_repo: str, refused: str | None
) -> None:
    """A trial's weights when no release pins them: hf://<hf_repo>, so it is org/repo."""
    edit(
        "catalog/models.yaml", "hf_repo: meta-llama/Llama-3.1-70B-Instruct", f"hf_repo: {hf_repo!r}"
    )

    found = [str(p) for p in pr_refusals(open_repo(denv_repo))]

    assert found == ([] if refused is None else [found[0]])
    if refused is not None:
        assert found[0].startswith("catalog/models.yaml:") and ": models[" in found[0]
        assert refused in found[0] and found[0].endswith("(pr policy rule weights)")


def test_flags_that_take_host_paths_or_run_remote_code_are_refused(
    denv_repo: Path, edit: Edit
) -> None:
    args = (
        "  args: [--trust_remote_code, --chat-template=/etc/passwd, --download-dir, models,"
        " --max-num-seqs, '64', --hf-overrides, '{\"cache\": \"~/.ssh\"}']\n"
    )
    edit(RECIPE, "  description:", args + "  description:")
    repo = open_repo(denv_repo)
    line = (denv_repo / RECIPE).read_text().splitlines().index(args.rstrip("\n")) + 1

    found = [str(p).split(" (pr policy rule")[0] for p in pr_refusals(repo)]

    def at(element: str) -> str:  # where the element starts on the args line
        return f"{RECIPE}:{line}:{args.index(element) + 1}"

    assert found == [
        f"{at('--trust_')}: recipe.args[0]: --trust-remote-code is refused in pull requests",
        f"{at('--chat-')}: recipe.args[1]: --chat-template takes a host path",
        f"{at('--download')}: recipe.args[2]: --download-dir takes a host path",
        f'{at(chr(39) + "{")}: recipe.args[7]: \'{{"cache": "~/.ssh"}}\' names a host path',
    ]


@pytest.mark.parametrize(
    ("engine", "version", "some"),
    [
        (
            "vllm",
            "0.33.0",
            {"--chat-template", "--download-dir", "--tokenizer", "--ssl-keyfile", "--worker-cls",
             "--allowed-local-media-path", "--lora-modules", "--middleware", "--generation-config",
             "--logits-processors", "--config", "--hf-config-path"},
        ),
        (
            "sglang",
            "0.5.23",
            {"--chat-template", "--download-dir", "--tokenizer-path", "--ssl-keyfile",
             "--lora-paths", "--completion-template", "--speculative-draft-model-path",
             "--weight-cache-socket"},
        ),
    ],
)  # fmt: skip
def test_host_path_flags_are_read_off_each_engines_flag_table(
    engine: str, version: str, some: set[str]
) -> None:
    """Which flags take a host path is derived from their names, for every flag of the table:
    a flag a new version adds is refused without anyone editing the policy."""
    flags = card(engine).table(version).flags
    derived = {flag for flag in flags if takes_host_path(flag)}
    assert some <= derived
    assert not derived & {"--max-num-seqs", "--port", "--kv-cache-dtype", "--tokenizer-mode"}


def _text_fields(model: type[BaseModel], at: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every field of `model` and the models inside it that can hold text."""
    found = []
    for name, info in model.model_fields.items():
        nested = _models(info.annotation)
        if nested:
            for inner in nested:
                found += _text_fields(inner, (*at, name))
        elif _holds_text(info.annotation):
            found.append((*at, name))
    return found


def _models(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models(arg)]


def _holds_text(annotation: Any) -> bool:
    if annotation is str or annotation is Any:
        return True
    if typing.get_origin(annotation) is typing.Literal:
        return any(isinstance(a, str) for a in typing.get_args(annotation))
    return any(_holds_text(arg) for arg in typing.get_args(annotation))


@pytest.mark.parametrize(
    ("model", "judged", "inert"),
    [(Recipe, RECIPE_JUDGED, RECIPE_INERT), (ReleaseBody, RELEASE_JUDGED, RELEASE_INERT)],
    ids=["recipe", "release"],
)
def test_every_text_field_a_pull_request_sets_is_judged_or_inert(
    model: type[BaseModel], judged: dict[Any, Any], inert: frozenset[Any]
) -> None:
    """A field added to a recipe or a release later must be placed in one of the two tables
    (until then pr_policy refuses its values, failing closed)."""
    listed = [*judged, *inert]
    unlisted = [
        field
        for field in _text_fields(model)
        if field != ("overrides",) and not any(field[: len(p)] == p for p in listed)
    ]
    assert unlisted == []


def test_a_trial_gets_the_fleets_token_only_when_the_trusted_policy_names_it(
    git_repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = "hf_DenvPolicyTestToken0123456789NEVERSENT"
    monkeypatch.setenv("HF_TOKEN", token)
    fleet = (git_repo / "fleets/local.yaml").read_text() + "  weights: { token_env: HF_TOKEN }\n"
    commit_file(git_repo, "fleets/local.yaml", fleet, "the local fleet's gated weights")
    grant = "pr:\n  secrets: [HF_TOKEN]\n"
    bigger = (git_repo / RELEASE).read_text().replace("max_batch: 128", "max_batch: 192")
    head = pull_request(git_repo, "token", {"policies/pr.yaml": grant, RELEASE: bigger})
    forge = LocalForge(git_repo)
    weights = f"hf://meta-llama/Llama-3.1-8B-Instruct@{COMMIT}"

    def request(cache: str) -> dict[str, Any]:
        source = pull_request_source(git_repo, trusted_ref(forge, git_repo), tmp_path / cache)
        repo = proposed(source, head)
        found = weights_request(repo.fleets["local"], weights, secrets=repo.policies.pr.secrets)
        assert found is not None
        return found

    assert request("default")["token"] is None  # the pull request's own grant counts for nothing
    commit_file(git_repo, "policies/pr.yaml", grant, "trials may fetch gated weights")
    assert request("granted")["token"] == token
    fleet_spec = open_repo(git_repo).fleets["local"]
    trusted = weights_request(fleet_spec, weights, secrets=None)  # a release of the fleet's own
    assert trusted is not None and trusted["token"] == token
