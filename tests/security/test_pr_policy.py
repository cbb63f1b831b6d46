"""What a pull request may propose is bounded by the trusted PR policy (policies/pr.yaml as the
trusted ref has it, safe defaults without it). Reproduced before: a pull request's release
with `weights: file:///home/denv/.ssh` and `image: attacker/anything:latest` validated and was
benched on the fleet's trial GPUs (the agent linked the folder into its cache and the engine
mounted it), `file:////` named the whole filesystem, `--trust-remote-code` and `--chat-template
/etc/passwd` were engine flags like any other, and a trial's prepare got the fleet's token.

Against real repositories (git, the local forge, the CLI as CI runs it): `denv validate
--pr-policy` names each refused field at path:line:col with its rule; `denv pr bench` starts
no trial (no connection to the fleet) and `denv pr plan` fails its check, both listing them; a
trial's prepare gets no token unless the trusted policy names its variable."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import typing
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from reconciler.engines.cards import card
from reconciler.engines.pr_policy import pr_refusals
from reconciler.fleet.prepare import weights_request
from reconciler.forge.local import LocalForge
from reconciler.pr.plan import proposed, pull_request_source
from reconciler.reconcile.source import InvalidRevision
from reconciler.spec.loader import open_repo
from reconciler.spec.pr_policy import RECIPE_INERT, RECIPE_JUDGED, RELEASE_INERT, RELEASE_JUDGED
from reconciler.spec.pr_rules import takes_host_path
from reconciler.spec.recipe import Recipe
from reconciler.spec.release import ReleaseBody
from scripts.walk_guides import parse
from tests.conftest import ROOT, Edit
from tests.forge.conftest import git_repo
from tests.forge.gitrepo import commit_file, git
from tests.pr.test_plan import denv
from tests.pr.test_trust import Listener, hostile_fleet, listener

__all__ = ["git_repo", "listener"]

RELEASE = "releases/chat-8b/denv.yaml"
RECIPE = "recipes/llama-3.1-8b/vllm@1.yaml"
COMMIT = "0e9e39f249a16976918f6564b8830bc894c89659"
HOSTILE = """\
release:
  model: chat-8b
  weights: file:///home/denv/.ssh
  recipe: llama-3.1-8b/vllm@1
  overrides:
    engine: { image: attacker/anything:latest }
    args: [--trust-remote-code, --chat-template, /etc/passwd]
  topology: { mode: aggregated, replicas: 1, gpus: 1 }
stages:
  - name: canary
    fleets: [local]
"""
ALLOWED = "vllm/vllm-openai, lmsysorg/sglang, vllm/*, lmsysorg/*, rocm/*"
REFUSED = [
    f"{RELEASE}:3:12: release.weights: file:///home/denv/.ssh is under no weights root of "
    "fleet local (no weights.roots) (pr policy rule weights)",
    f"{RELEASE}:6:22: release.overrides.engine.image: attacker/anything:latest is not an "
    f"allowed image (allowed: {ALLOWED}) (pr policy rule images)",
    f"{RELEASE}:7:12: release.overrides.args[0]: --trust-remote-code is refused in pull "
    "requests (pr policy rule refused_flags)",
    f"{RELEASE}:7:33: release.overrides.args[1]: --chat-template takes a host path "
    "(pr policy rule refused_flags)",
    f"{RELEASE}:7:50: release.overrides.args[2]: '/etc/passwd' names a host path "
    "(pr policy rule refused_flags)",
]


def validate(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "reconciler", "validate", str(repo), *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=repo,
    )


def test_validate_names_each_refused_field_and_its_rule(denv_repo: Path) -> None:
    (denv_repo / RELEASE).write_text(HOSTILE)
    assert validate(denv_repo).returncode == 0  # valid files: only the PR policy refuses them

    run = validate(denv_repo, "--pr-policy")

    assert run.returncode == 1, run.stdout
    assert run.stderr.splitlines() == REFUSED
    as_json = validate(denv_repo, "--pr-policy", "--json")
    assert as_json.returncode == 1
    problems = json.loads(as_json.stdout)["problems"]
    assert [f"{p['path']}:{p['line']}:{p['col']}: {p['message']}" for p in problems] == REFUSED


def test_the_repository_passes_its_own_default_policy(denv_repo: Path) -> None:
    """Every recipe, release and model this repository ships is within the defaults."""
    run = validate(denv_repo, "--pr-policy")
    assert run.returncode == 0, run.stderr


def _pull_request(repo: Path, branch: str, files: dict[str, str]) -> tuple[int, str]:
    git(repo, "checkout", "-q", "-b", branch)
    for path, text in files.items():
        head = commit_file(repo, path, text, f"{branch}: {path}")
    git(repo, "checkout", "-q", "main")
    return LocalForge(repo).open_pr(branch, f"{branch}").number, head


def _trace(folder: Path) -> Path:
    trace = folder / "short.jsonl"
    line = {"timestamp": 0, "input_length": 600, "output_length": 8, "hash_ids": [1, 2]}
    trace.write_text(json.dumps(line) + "\n")
    return trace


def test_a_hostile_release_starts_no_trial_and_fails_both_checks(
    git_repo: Path, listener: Listener, tmp_path: Path
) -> None:
    # The trusted fleet is an SSH fleet on a port that counts connections: a trial dials it.
    commit_file(git_repo, "fleets/local.yaml", hostile_fleet(listener.port), "ssh fleet")
    number, head = _pull_request(git_repo, "hostile", {RELEASE: HOSTILE})

    run = denv(
        git_repo, "bench", "--pr", str(number), "--traffic", str(_trace(tmp_path)),
        "--concurrency", "1", "--requests", "2", "--json",
    )  # fmt: skip

    assert run.returncode == 0, run.stderr
    answer: dict[str, Any] = json.loads(run.stdout)
    assert answer["runs"] == [] and listener.accepted == 0
    assert answer["check"]["conclusion"] == "failure"
    assert answer["check"]["title"] == "invalid or refused files: 5 problems"
    assert answer["check"]["summary"].splitlines() == REFUSED
    forge = LocalForge(git_repo)
    [bench] = [c.body for c in forge.comments(number) if c.body.startswith("<!-- denv:bench")]
    assert f"### denv bench for `{head[:12]}`" in bench
    assert "**Invalid or refused files: nothing benched.**\n\n```\n" + "\n".join(REFUSED) in bench

    planned = denv(git_repo, "plan", "--pr", str(number), "--json")
    assert planned.returncode == 0, planned.stderr
    plan = json.loads(planned.stdout)
    assert plan["problems"] == REFUSED and plan["check"]["conclusion"] == "failure"
    assert listener.accepted == 0
    [comment] = [c.body for c in forge.comments(number) if c.body.startswith("<!-- denv:plan")]
    assert REFUSED[1] in comment


def test_a_pull_request_cannot_widen_its_own_policy(git_repo: Path, tmp_path: Path) -> None:
    """policies/pr.yaml is read from the trusted ref: a pull request that allows its image
    there is refused all the same; once the default branch allows it, it is not."""
    image = "registry.example.com/ml/vllm:v0.33.0"
    release = (git_repo / RELEASE).read_text()
    release = release.replace("settings: { max_batch: 128 }", f"engine: {{ image: {image} }}")
    widen = "pr:\n  images: [vllm/*, lmsysorg/*, rocm/*, registry.example.com/ml/*]\n"
    number, head = _pull_request(
        git_repo, "own-image", {"policies/pr.yaml": widen, RELEASE: release}
    )
    pr = LocalForge(git_repo).pull_request(number)
    with pytest.raises(InvalidRevision) as refused:
        proposed(pull_request_source(git_repo, pr, tmp_path / "a"), head)
    [problem] = refused.value.problems
    assert str(problem).startswith(f"{RELEASE}:8:22: release.overrides.engine.image: {image}")

    commit_file(git_repo, "policies/pr.yaml", widen, "allow our registry")
    assert proposed(pull_request_source(git_repo, pr, tmp_path / "b"), head).releases


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
    number, head = _pull_request(git_repo, "token", {"policies/pr.yaml": grant, RELEASE: bigger})
    pr = LocalForge(git_repo).pull_request(number)
    weights = f"hf://meta-llama/Llama-3.1-8B-Instruct@{COMMIT}"

    def request(cache: str) -> dict[str, Any]:
        repo = proposed(pull_request_source(git_repo, pr, tmp_path / cache), head)
        found = weights_request(repo.fleets["local"], weights, secrets=repo.policies.pr.secrets)
        assert found is not None
        return found

    assert request("default")["token"] is None  # the pull request's own grant counts for nothing
    commit_file(git_repo, "policies/pr.yaml", grant, "trials may fetch gated weights")
    assert request("granted")["token"] == token
    fleet_spec = open_repo(git_repo).fleets["local"]
    trusted = weights_request(fleet_spec, weights, secrets=None)  # a release of the fleet's own
    assert trusted is not None and trusted["token"] == token


def test_the_docs_example_runs_as_printed(denv_repo: Path) -> None:
    """docs/github.md's policy file is valid, and its hostile release gets the refusals the
    page prints, from the command it prints."""
    doc = (ROOT / "docs/github.md").read_text()
    section = doc.split("## What a pull request may propose", 1)[1].split("\n## ")[0]
    blocks = section.split("```yaml\n")[1:]
    policy, release = (block.split("```", 1)[0] for block in blocks[:2])
    assert policy.startswith("# policies/pr.yaml") and release.startswith(f"# {RELEASE}")
    (denv_repo / "policies/pr.yaml").write_text(policy)
    (denv_repo / RELEASE).write_text(release)
    [block] = [b for b in parse(section, "docs/github.md") if b.commands]
    [command] = block.commands
    assert block.output is not None and command.text.startswith("denv validate --pr-policy")
    shown = section.splitlines()[block.output[0] + 1 : block.output[1]]

    run = subprocess.run(
        [sys.executable, "-m", "reconciler", *shlex.split(command.text, comments=True)[1:]],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=denv_repo,
        env={**os.environ, "COLUMNS": "200"},
    )

    assert run.returncode == command.expect, run.stderr
    assert (run.stdout + run.stderr).splitlines() == shown
