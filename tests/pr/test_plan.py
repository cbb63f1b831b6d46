"""`denv pr plan --pr N` as CI or a person runs it: the head validated and planned against what the
local fleet runs, the plan commented (edited in place on each run) and the `denv plan` check set
— on the local forge, and on GitHub through the fake on loopback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from reconciler.forge.local import LocalForge
from reconciler.pr.plan import _check
from reconciler.reconcile.plan import FleetUsage, Plan
from tests.forge.conftest import TOKEN, GitHubSetup
from tests.forge.gitrepo import commit_file, git
from tests.forge.sshkeys import allow, new_key, sign_openings
from tests.forge.test_github import open_pr

RELEASE = "releases/chat-8b/denv.yaml"
SECOND = """\
release:
  model: second
  weights: hf://meta-llama/Llama-3.1-8B-Instruct@0e9e39f249a16976918f6564b8830bc894c89659
  recipe: llama-3.1-8b/vllm@1
  topology: { mode: aggregated, replicas: 7, gpus: 1 }
stages:
  - name: canary
    fleets: [local]
"""


def denv_in(
    repo: Path,
    *args: str,
    env: dict[str, str] | None = None,
    timeout: float = 300,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """`denv ARGS` in `cwd` (default: `repo`), with a state and cache of its own beside it."""
    state = repo.parent / f"{repo.name}-state"
    base = {**os.environ, "DENV_HOME": str(state / "home"), "DENV_CACHE": str(state / "cache")}
    for name in ("DENV_REPO", "DENV_FORGE", "GITHUB_ACTIONS"):
        base.pop(name, None)
    return subprocess.run(
        [sys.executable, "-m", "reconciler", *args],
        capture_output=True,
        text=True,
        cwd=repo if cwd is None else cwd,
        env={**base, **(env or {})},
        timeout=timeout,
    )


def denv(
    repo: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`denv pr ARGS --repo REPO`."""
    return denv_in(repo, "pr", *args, "--repo", str(repo), env=env, timeout=120, cwd=Path.cwd())


def planned(repo: Path, number: int) -> dict[str, Any]:
    run = denv(repo, "plan", "--pr", str(number), "--json")
    assert run.returncode == 0, run.stderr
    answer: dict[str, Any] = json.loads(run.stdout)
    return answer


def branch(repo: Path, name: str, path: str, text: str) -> str:
    git(repo, "checkout", "-q", "-b", name)
    sha = commit_file(repo, path, text, f"{name}: change {path}")
    git(repo, "checkout", "-q", "main")
    return sha


def test_plan_then_fix_then_break_edits_one_comment(
    git_repo: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    grace = new_key(tmp_path_factory.mktemp("keys"), "grace")
    allow(git_repo, {"grace": grace})
    bigger = (git_repo / RELEASE).read_text().replace("max_batch: 128", "max_batch: 192")
    head = branch(git_repo, "bigger-batch", RELEASE, bigger)
    sign_openings(git_repo, listed=True)
    opened = denv(git_repo, "open", "--head", "bigger-batch")
    assert (
        opened.stdout.strip() == "Opened #1 bigger-batch: change releases/chat-8b/denv.yaml: "
        "bigger-batch → main."
    ), opened.stderr

    first = planned(git_repo, 1)
    assert first["files"] == [RELEASE] and first["problems"] == [] == first["unplaceable"]
    assert first["check"] == {
        "name": "denv plan",
        "title": "Plan: 3 to start, 0 to replace, 0 to stop, 0 unchanged.",
        "summary": "Plan: 3 to start, 0 to replace, 0 to stop, 0 unchanged.",
        "conclusion": "success",
    }
    forge = LocalForge(git_repo)
    [comment] = forge.comments(1)
    assert comment.body.startswith(
        f"<!-- denv:plan -->\n### denv plan for `{head[:12]}` against `main`"
    )
    assert "+ chat-8b.canary.local.aggregated-0  localhost  GPUs 0 " in comment.body

    # a later commit breaks the release: the same comment now lists the problem, the check fails
    git(git_repo, "checkout", "-q", "bigger-batch")
    broken = commit_file(
        git_repo, RELEASE, bigger.replace("max_batch: 192", "max_batch: 0"), "oops"
    )
    git(git_repo, "checkout", "-q", "main")
    second = planned(git_repo, 1)
    assert second["comment_ids"] == first["comment_ids"] == [comment.id]
    assert second["problems"] == [
        "releases/chat-8b/denv.yaml:8:28: release.overrides.settings.max_batch: "
        "Input should be greater than 0"
    ]
    assert second["check"]["conclusion"] == "failure"
    assert second["check"]["title"] == "invalid files: 1 problem"
    [edited] = forge.comments(1)
    assert edited.body.startswith(f"<!-- denv:plan -->\n### denv plan for `{broken[:12]}` against")
    assert "**Invalid files: nothing will be applied.**" in edited.body
    assert [c.conclusion for c in forge.checks(broken)] == ["failure"]
    assert [c.conclusion for c in forge.checks(head)] == ["success"]  # the older head keeps its

    denv(git_repo, "approve", "1", "--as", "grace", "--key", str(grace))
    refused = denv(git_repo, "merge", "1")
    assert refused.returncode == 1 and "check 'denv plan' is failure" in refused.stderr

    git(git_repo, "checkout", "-q", "bigger-batch")
    fixed = commit_file(git_repo, RELEASE, bigger, "fix")
    git(git_repo, "checkout", "-q", "main")
    assert planned(git_repo, 1)["check"]["conclusion"] == "success"
    approved = denv(git_repo, "approve", "1", "--as", "grace", "--key", str(grace))
    assert approved.returncode == 0, approved.stderr  # the earlier one approved another head
    assert denv(git_repo, "merge", "1").returncode == 0
    assert "max_batch: 192" in (git_repo / RELEASE).read_text()
    assert [c.conclusion for c in forge.checks(fixed)] == ["success"]


def test_a_deployment_that_cannot_be_placed_fails_the_check(git_repo: Path) -> None:
    branch(git_repo, "second", "releases/second/denv.yaml", SECOND)
    LocalForge(git_repo).open_pr("second", "second: 7 replicas")
    answer = planned(git_repo, 1)
    assert answer["problems"] == []
    assert answer["check"]["conclusion"] == "failure"
    assert answer["check"]["title"] == "cannot be placed"
    assert answer["unplaceable"] == [
        "second / canary on local: replica 6 needs 1 GPU in one domain; the most free in one "
        "domain of local is 0 (others are in use, busy with foreign processes, or kept as the "
        "fleet's 8 trial GPUs)"
    ], answer["unplaceable"]
    [comment] = LocalForge(git_repo).comments(1)
    assert "second / canary / local — not planned" in comment.body


def test_only_open_pull_requests_are_planned(git_repo: Path) -> None:
    branch(git_repo, "second", "releases/second/denv.yaml", SECOND)
    forge = LocalForge(git_repo)
    forge.open_pr("second", "second")
    forge.approve(1, "grace")
    forge.merge(1)
    run = denv(git_repo, "plan", "--pr", "1")
    assert run.returncode == 1 and "Traceback" not in run.stderr
    assert run.stderr.strip() == "pull request #1 is merged: only open ones are planned"
    missing = denv(git_repo, "plan", "--pr", "9")
    assert missing.returncode == 1 and missing.stderr.startswith("no local pull request #9")


def test_on_github_through_the_fake(github: GitHubSetup) -> None:
    number, head = open_pr(github)
    env = {
        "DENV_FORGE": "github",
        "GITHUB_REPOSITORY": github.fake.full_name,
        "GITHUB_API_URL": github.fake.api_url,
        "DENV_GITHUB_TOKEN": TOKEN,
    }
    run = denv(github.work, "plan", "--pr", str(number), env=env)
    assert run.returncode == 0, run.stderr
    assert TOKEN not in run.stdout + run.stderr
    assert run.stdout.startswith(
        f"#{number} at {head[:12]}: check 'denv plan' success: Plan: 3 to start"
    )
    [body] = github.fake.comment_bodies(number)
    assert body.startswith(f"<!-- denv:plan -->\n### denv plan for `{head[:12]}` against `main`")
    [check] = github.forge.checks(head)
    assert (check.name, check.conclusion) == ("denv plan", "success")


def test_a_bounds_change_shows_in_the_plan_comment(github: GitHubSetup) -> None:
    """Git owns an elastic stage's bounds: a pull request raising the canary's minimum from
    1 to 2 replicas is reviewed like any change, its plan comment saying the count within
    the new bounds."""
    work = github.work
    elastic = (
        (work / RELEASE)
        .read_text()
        .replace("  - name: canary\n", "  - name: canary\n    replicas: {min: 1, max: 8}\n")
    )
    commit_file(work, RELEASE, elastic, "chat-8b: the canary elastic, 1 to 8 replicas")
    git(work, "push", "-q", "origin", "main")
    git(work, "checkout", "-q", "-B", "min-2", "main")
    head = commit_file(work, RELEASE, elastic.replace("min: 1", "min: 2"), "chat-8b: min 2")
    git(work, "push", "-q", "origin", "min-2")
    git(work, "checkout", "-q", "main")
    number = github.fake.open_pull("min-2", "chat-8b: at least 2 replicas", author="ada")
    env = {
        "DENV_FORGE": "github",
        "GITHUB_REPOSITORY": github.fake.full_name,
        "GITHUB_API_URL": github.fake.api_url,
        "DENV_GITHUB_TOKEN": TOKEN,
    }
    run = denv(work, "plan", "--pr", str(number), env=env)
    assert run.returncode == 0, run.stderr
    [body] = github.fake.comment_bodies(number)
    assert body.startswith(f"<!-- denv:plan -->\n### denv plan for `{head[:12]}` against `main`")
    [title] = [line for line in body.splitlines() if "chat-8b / canary / local" in line]
    assert title.endswith(" — replicas 2 (2–8)**"), body
    assert "+ chat-8b.canary.local.aggregated-1 " in body and "aggregated-2" not in body


def test_a_plan_that_missed_hosts_is_neutral_and_names_them() -> None:
    """`denv plan` exits 1 when a host did not answer; the check says so without blocking
    the merge (a pull request that takes the dead host out must be able to land)."""
    usage = FleetUsage(fleet="far", gpus=8, trial_gpus=0, before=0, after=0,
                       unreachable={"far-h1": "connection refused"})  # fmt: skip
    check = _check([], [], Plan(head="abc", fleets=(usage,)))
    assert check.conclusion == "neutral" and not check.conclusion.blocks
    assert check.title.endswith("1 host not reached: what runs there is not known.")
    assert check.summary.splitlines()[-1] == "far: far-h1: connection refused"
    reached = _check(
        [], [], Plan(head="abc", fleets=(usage.model_copy(update={"unreachable": {}}),))
    )
    assert reached.conclusion == "success"
