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
from pathlib import Path
from typing import Any

import pytest

from reconciler.forge.local import LocalForge
from reconciler.forge.trusted import trusted_ref
from reconciler.pr.plan import proposed, pull_request_source
from reconciler.reconcile.source import InvalidRevision
from scripts.walk_guides import parse
from tests.conftest import ROOT
from tests.forge.conftest import git_repo
from tests.forge.gitrepo import commit_file, git
from tests.forge.sshkeys import sign_openings
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


def pull_request(repo: Path, branch: str, files: dict[str, str], base: str = "main") -> str:
    """Pull request #1, from `branch` (off `base`) with `files`, its opening signed; its head."""
    git(repo, "checkout", "-q", base)
    git(repo, "checkout", "-q", "-b", branch)
    for path, text in files.items():
        head = commit_file(repo, path, text, f"{branch}: {path}")
    git(repo, "checkout", "-q", "main")
    key = sign_openings(repo)
    assert LocalForge(repo).open_pr(branch, branch, base=base, key=key).number == 1
    return head


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
    number, head = 1, pull_request(git_repo, "hostile", {RELEASE: HOSTILE})

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
    head = pull_request(git_repo, "own-image", {"policies/pr.yaml": widen, RELEASE: release})
    forge = LocalForge(git_repo)
    with pytest.raises(InvalidRevision) as refused:
        proposed(pull_request_source(git_repo, trusted_ref(forge, git_repo), tmp_path / "a"), head)
    [problem] = refused.value.problems
    assert str(problem).startswith(f"{RELEASE}:8:22: release.overrides.engine.image: {image}")

    commit_file(git_repo, "policies/pr.yaml", widen, "allow our registry")
    trusted = trusted_ref(forge, git_repo)
    assert proposed(pull_request_source(git_repo, trusted, tmp_path / "b"), head).releases


def test_only_the_default_branchs_policy_lets_another_base_run_trials(
    git_repo: Path, listener: Listener
) -> None:
    """A pull request into `release-2` is planned, never benched, until the default branch's
    policy names `release-2` in allowed_bases; the pull request's own policy edit does not.
    The trusted fleet is an SSH fleet on a port that counts connections: a trial dials it."""
    commit_file(git_repo, "fleets/local.yaml", hostile_fleet(listener.port), "ssh fleet")
    git(git_repo, "branch", "release-2")
    allow = "pr:\n  allowed_bases: [release-2]\n"
    bigger = (git_repo / RELEASE).read_text().replace("max_batch: 128", "max_batch: 192")
    pull_request(git_repo, "fix", {"policies/pr.yaml": allow, RELEASE: bigger}, "release-2")
    refusal = "base, `release-2`, is not the default branch `main`"

    planned = denv(git_repo, "plan", "--pr", "1", "--json")  # observes the fleet's hosts
    observed = listener.accepted
    benched = denv(git_repo, "bench", "--pr", "1", "--requests", "2", "--json")

    assert planned.returncode == 0 == benched.returncode, planned.stderr + benched.stderr
    assert json.loads(benched.stdout)["check"]["conclusion"] == "neutral"
    assert listener.accepted == observed  # the bench connected to nothing
    forge = LocalForge(git_repo)
    comments = [c.body for c in forge.comments(1)]
    assert sum(refusal in body for body in comments) == 2  # the plan's and the bench's

    commit_file(git_repo, "policies/pr.yaml", allow, "pull requests into release-2 are benched")
    benched = denv(git_repo, "bench", "--pr", "1", "--requests", "2", "--json")
    assert benched.returncode == 0, benched.stderr
    assert listener.accepted > observed  # now its trial dials the fleet
    [bench] = [c.body for c in forge.comments(1) if c.body.startswith("<!-- denv:bench")]
    assert refusal not in bench


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
