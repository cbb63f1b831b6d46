"""`denv plan` as a user runs it: desired state from a git repository (a path or a URL), the
local fleet observed through its real agent, the plan as text, JSON or markdown."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pygit2
import pytest

from reconciler.fleet.hostagent import AgentClient
from reconciler.fleet.transport import LocalTransport
from tests.conftest import ROOT
from tests.reconcile.conftest import GitRepo

RELEASE = "releases/chat-8b/denv.yaml"
SLEEP = [sys.executable, "-c", "import time; time.sleep(120)"]


def denv(*args: str, home: Path, cache: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DENV_HOME": str(home), "DENV_CACHE": str(cache)}
    env.pop("DENV_REPO", None)
    return subprocess.run(
        [sys.executable, "-m", "reconciler", "plan", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
    )


@pytest.fixture
def git_repo(denv_repo: Path, tmp_path_factory: pytest.TempPathFactory) -> GitRepo:
    repo = GitRepo(denv_repo, tmp_path_factory.mktemp("cache"))
    repo.commit("initial")
    return repo


@pytest.fixture
def agent(tmp_path: Path) -> Iterator[AgentClient]:
    env = {**os.environ, "DENV_HOME": str(tmp_path / "home")}
    client = AgentClient(LocalTransport(env=env), python=sys.executable)
    yield client
    for unit in client.units():
        client.stop(unit.id, grace=1)


def plan_json(repo: GitRepo, home: Path, *args: str) -> dict[str, Any]:
    run = denv("--repo", str(repo.path), "--json", *args, home=home, cache=repo.cache)
    assert run.returncode == 0, run.stderr
    answer: dict[str, Any] = json.loads(run.stdout)
    return answer


def test_a_fresh_deploy_as_text_json_and_markdown(git_repo: GitRepo, tmp_path: Path) -> None:
    home = tmp_path / "home"
    text = denv("--repo", str(git_repo.path), home=home, cache=git_repo.cache)
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[0] == f"denv plan at {str(git_repo.git.head.target)[:12]}"
    first = "  + chat-8b.canary.local.aggregated-0  localhost  GPUs 0 "
    assert any(line.startswith(first) for line in lines)
    assert "chat-8b / prod: not deployed yet: no pin in releases/chat-8b/promotions.yaml" in lines
    assert lines[-1] == "Plan: 3 to start, 0 to replace, 0 to stop, 0 unchanged."

    answer = plan_json(git_repo, home)
    assert answer["counts"] == {"start": 3, "stop": 0, "replace": 0, "keep": 0}
    assert answer["empty"] is False
    assert answer["fleets"][0]["observed"] is True  # the local agent answered
    argv = answer["actions"][0]["desired"]["unit"]["argv"]
    assert argv[0] == sys.executable  # a local fleet runs units with denv's interpreter

    markdown = denv("--repo", str(git_repo.path), "--markdown", home=home, cache=git_repo.cache)
    assert markdown.stdout.startswith("<!-- denv:plan -->\n### denv plan for `")
    assert "```diff\n+ chat-8b.canary.local.aggregated-0" in markdown.stdout


def test_what_the_agent_runs_is_kept_and_units_denv_did_not_start_are_left_alone(
    git_repo: GitRepo, tmp_path: Path, agent: AgentClient
) -> None:
    home = tmp_path / "home"
    agent.launch({"id": "busy", "digest": "b", "gpus": [0, 1], "argv": SLEEP})
    first = plan_json(git_repo, home)
    starts = [a for a in first["actions"] if a["kind"] == "start"]
    assert [a["gpus_after"] for a in starts] == [[2], [3], []]  # around the busy GPUs
    for action in starts:  # a stand-in process under each unit's id, digest and labels
        agent.launch({**_payload(action["desired"]), "argv": SLEEP})

    again = plan_json(git_repo, home)
    assert again["empty"] is True and again["counts"]["keep"] == 3
    assert all(a["unit"] != "busy" for a in again["actions"])

    git_repo.replace(RELEASE, "max_batch: 128", "max_batch: 256")
    git_repo.commit("bigger batches")
    changed = denv("--repo", str(git_repo.path), home=home, cache=git_repo.cache).stdout
    rolled = [line.split()[1] for line in changed.splitlines() if line.startswith("  ~ ")]
    assert rolled == ["chat-8b.canary.local.aggregated-0", "chat-8b.canary.local.aggregated-1"]
    assert "busy" not in changed


def _payload(desired: dict[str, Any]) -> dict[str, Any]:
    unit = desired["unit"]
    return {
        "id": desired["id"],
        "digest": desired["digest"],
        "argv": unit["argv"],
        "env": unit["env"],
        "port": unit["port"],
        "gpus": unit["gpu_indices"],
        "labels": desired["labels"],
    }


def test_a_remote_url_is_cloned_into_the_cache(
    git_repo: GitRepo, tmp_path_factory: pytest.TempPathFactory
) -> None:
    origin = tmp_path_factory.mktemp("origin") / "origin.git"
    pygit2.clone_repository(str(git_repo.path), str(origin), bare=True)
    home = tmp_path_factory.mktemp("home")
    run = denv("--repo", f"file://{origin}", "--json", home=home, cache=git_repo.cache)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["head"] == str(git_repo.git.head.target)
    assert len(list(git_repo.cache.glob("repos/*.git"))) == 1  # under $DENV_CACHE


def test_an_unknown_revision_is_a_clear_error(git_repo: GitRepo, tmp_path: Path) -> None:
    home = tmp_path / "home"
    run = denv("--repo", str(git_repo.path), "--rev", "nope", home=home, cache=git_repo.cache)
    assert run.returncode == 1
    assert "no commit 'nope'" in run.stderr and "Traceback" not in run.stderr


def test_a_work_tree_that_differs_from_head_is_named_and_a_broken_edit_exits_1(
    git_repo: GitRepo, tmp_path_factory: pytest.TempPathFactory
) -> None:
    home = tmp_path_factory.mktemp("home")  # outside the repository: its files are untracked
    clean = denv("--repo", str(git_repo.path), home=home, cache=git_repo.cache)
    assert clean.returncode == 0 and "work tree" not in clean.stderr

    git_repo.replace(RELEASE, "max_batch: 128", "max_batch: 256")  # valid, not committed
    (git_repo.path / "notes.txt").write_text("untracked\n")
    valid = denv("--repo", str(git_repo.path), "--json", home=home, cache=git_repo.cache)
    assert valid.returncode == 0, valid.stderr
    head = str(git_repo.git.head.target)
    assert f"warning: the work tree differs from HEAD ({head[:12]}): notes.txt, {RELEASE}" in (
        valid.stderr
    )
    answer = json.loads(valid.stdout)
    assert answer["head"] == head and answer["uncommitted"] == ["notes.txt", RELEASE]
    assert answer["uncommitted_errors"] == []

    git_repo.replace(RELEASE, "max_batch: 256", "max_batch: lots")  # broken
    broken = denv("--repo", str(git_repo.path), "--json", home=home, cache=git_repo.cache)
    assert broken.returncode == 1 and "Traceback" not in broken.stderr
    errors = json.loads(broken.stdout)["uncommitted_errors"]
    assert errors and all(line.startswith(f"{RELEASE}:") for line in errors)
    assert "the uncommitted files do not validate" in broken.stderr
    assert errors[0] in broken.stderr

    at_rev = denv("--repo", str(git_repo.path), "--rev", "HEAD", home=home, cache=git_repo.cache)
    assert at_rev.returncode == 0 and "work tree" not in at_rev.stderr  # a revision asked for
