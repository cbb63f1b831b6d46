"""`denv deploy` as a person runs it on a real repository: a recipe or a benchmark result becomes
releases/<name>/denv.yaml on the bot's branch and a local pull request with the plan as its first
comment, or with --commit a commit on the current branch. A refusal writes nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from reconciler.forge.local import LocalForge
from reconciler.spec.loader import open_repo
from tests.catalog.factories import result
from tests.forge.gitrepo import git, init_repo

SHA_8B = "0e9e39f249a16976918f6564b8830bc894c89659"
TRT = "trt-8b-h200"
SGLANG = "sglang-8b-h200"
RESULTS = [
    result(TRT, model="llama-3.1-8b", engine="trt-llm", gpus=1, output_tok_s=9000.0),
    result(SGLANG, model="llama-3.1-8b", recipe="llama-3.1-8b/sglang@1", gpus=1, concurrency=32),
    result(
        "vllm-8b-b200",
        model="llama-3.1-8b",
        hardware="b200",
        engine="vllm",
        recipe="llama-3.1-8b/vllm@1",
        gpus=1,
    ),
]


@pytest.fixture
def repo(denv_repo: Path) -> Path:
    """This repository's denv files and three published results, committed on main."""
    published = denv_repo / "results" / "published" / "tests.jsonl"
    published.parent.mkdir(parents=True)
    published.write_text("".join(r.model_dump_json(exclude_none=True) + "\n" for r in RESULTS))
    return init_repo(denv_repo)


def denv(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    state = repo.parent / f"{repo.name}-state"
    env = {
        **os.environ,
        "DENV_HOME": str(state / "home"),  # the local fleet's agent: observed, nothing started
        "DENV_CACHE": str(state / "cache"),
        "XDG_STATE_HOME": str(state / "xdg"),  # where `denv bench` keeps its last ranking
    }
    for name in ("DENV_REPO", "DENV_FORGE", "GITHUB_ACTIONS"):  # the local forge, always
        env.pop(name, None)
    return subprocess.run(
        [sys.executable, "-m", "reconciler", *args, "--repo", str(repo)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def ok(run: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert run.returncode == 0, run.stderr
    answer: dict[str, Any] = json.loads(run.stdout)
    return answer


def test_a_recipe_becomes_a_pull_request_with_its_plan(repo: Path) -> None:
    args = ("deploy", "--recipe", "llama-3.1-8b/sglang@1", "--target", "local")
    answer = ok(denv(repo, *args, "--name", "chat-small", "--json"))
    pr, check = answer["pull_request"], answer["check"]
    assert (pr["number"], pr["head_branch"], pr["base_branch"]) == (1, "deploy/chat-small", "main")
    assert pr["author"] == "denv-bot" and answer["files"] == ["releases/chat-small/denv.yaml"]
    assert answer["weights"] == f"hf://meta-llama/Llama-3.1-8B-Instruct@{SHA_8B}"
    assert check["conclusion"] == "success", check
    assert check["title"] == "Plan: 5 to start, 0 to replace, 0 to stop, 0 unchanged."

    text = git(repo, "show", f"{pr['head_sha']}:releases/chat-small/denv.yaml")
    assert "# Written by `denv deploy` from recipe llama-3.1-8b/sglang@1." in text
    assert "  recipe: llama-3.1-8b/sglang@1\n" in text and "    fleets: [local]" in text
    assert git(repo, "log", "-1", "--format=%an", pr["head_sha"]) == "denv-bot"
    assert not (repo / "releases" / "chat-small").exists()  # main is as it was

    comments = LocalForge(repo).comments(1)
    assert [c.author for c in comments] == ["denv-bot"]
    body = comments[0].body
    assert body.startswith("<!-- denv:plan -->\n### denv plan for ")
    assert "+ chat-small.canary.local.aggregated-0  localhost  GPUs 2 " in body

    again = ok(denv(repo, *args, "--name", "chat-small", "--json"))  # safe to repeat
    assert again["pull_request"]["number"] == 1 and again["comment_ids"] == answer["comment_ids"]
    assert len(LocalForge(repo).comments(1)) == 1


def test_a_result_denv_cannot_launch_is_refused_with_the_nearest_it_can(repo: Path) -> None:
    ranking = ok(denv(repo, "bench", "--model", "llama-3.1-8b", "--json"))
    rows = [r["result"] for r in ranking["ranked"] + ranking["missed"]]
    row = rows.index(TRT) + 1

    refused = denv(repo, "deploy", "--from-bench", str(row), "--target", "local")
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    assert refused.stderr.startswith(
        f"cannot deploy result {TRT}: it ran trt-llm, which denv cannot launch "
        "(denv launches vllm, sglang).\nThe nearest result denv can deploy: "
        f"{SGLANG} (sglang 0.5.9, recipe llama-3.1-8b/sglang@1, h200, 1024/1024 at "
        "concurrency 32):\n"
        f"  denv deploy --from-bench {SGLANG} --target local\n"
    ), refused.stderr
    assert git(repo, "branch", "--format=%(refname:short)") == "main"

    answer = ok(denv(repo, "deploy", "--from-bench", SGLANG, "--target", "local", "--json"))
    assert answer["release"] == "llama-3.1-8b" and answer["recipe"] == "llama-3.1-8b/sglang@1"
    assert answer["from"] == f"result {SGLANG} (published)"
    assert answer["check"]["conclusion"] == "success"


def test_commit_goes_straight_to_the_current_branch(repo: Path) -> None:
    (repo / "NOTES.md").write_text("staged, not part of the deploy\n")
    git(repo, "add", "NOTES.md")
    before = git(repo, "rev-parse", "HEAD")
    args = ("deploy", "--recipe", "llama-3.1-8b/vllm@1", "--target", "local", "--name", "direct")
    answer = ok(denv(repo, *args, "--commit", "--json"))
    assert answer["commit"] == git(repo, "rev-parse", "HEAD") != before
    path = "releases/direct/denv.yaml"
    shown = git(repo, "show", "--name-only", "--format=%an|%s", "HEAD").splitlines()
    assert shown == ["Ada Lovelace|deploy direct: llama-3.1-8b/vllm@1 on local", "", path]
    assert (repo / path).read_text().strip() == git(repo, "show", f"HEAD:{path}")
    assert git(repo, "status", "--porcelain") == "A  NOTES.md"
    assert LocalForge(repo).pull_requests() == []
    assert not open_repo(repo).errors


REFUSALS = [
    (
        ("--recipe", "deepseek-r1/sglang-fp8-h200-1p-tp8-6d-tp8@1"),
        "cannot run on local: needs 56 GPUs; local has 8 for serving (16 minus 8 trial GPUs)",
    ),
    (
        ("--recipe", "deepseek-r1/sglang-fp4-b200-tp4@1"),
        "cannot run on local: deepseek-r1/sglang-fp4-b200-tp4@1 is for b200, not h200 (local)",
    ),
    (("--recipe", "llama-3.1-8b/vllm@1", "--name", "chat-8b"), "releases/chat-8b/ exists at "),
    (
        ("--recipe", "llama-3.1-8b/vllm@1", "--name", "../../escape"),
        "--name '../../escape': a release name is lowercase letters, digits",
    ),
    (
        ("--recipe", "llama-3.1-8b/vllm@1", "--stage", "Canary"),
        "releases/llama-3.1-8b/denv.yaml:8:11: stages[0].name: String should match pattern",
    ),
    (("--recipe", "llama-3.1-8b/vllm@1", "--target", "nowhere"), "no fleet 'nowhere' (fleets: "),
    (("--from-bench", "7"), "no ranking to pick a row from: run denv bench first"),
    (("--target", "local"), "give one of --from-bench N|RESULT-ID and --recipe ID"),
]


@pytest.mark.parametrize(
    ("args", "message"),
    REFUSALS,
    ids=[
        "too-big",
        "hardware",
        "name-taken",
        "bad-name",
        "invalid-file",
        "no-fleet",
        "no-ranking",
        "neither",
    ],
)
def test_refusals_write_nothing(repo: Path, args: tuple[str, ...], message: str) -> None:
    target = () if "--target" in args else ("--target", "local")
    run = denv(repo, "deploy", *args, *target)
    assert run.returncode == 1 and "Traceback" not in run.stderr
    assert message in run.stderr, run.stderr
    assert git(repo, "branch", "--format=%(refname:short)") == "main"
    assert git(repo, "status", "--porcelain") == ""
    assert not (repo / ".git" / "denv-forge" / "prs").exists()


def test_a_model_without_pinned_weights_is_refused(denv_repo: Path) -> None:
    models = denv_repo / "catalog" / "models.yaml"
    lines = models.read_text().splitlines(keepends=True)
    at = lines.index("    hf_repo: meta-llama/Llama-3.1-8B-Instruct\n") + 1
    end = at + 1
    while lines[end].startswith("      "):  # the weights block of llama-3.1-8b
        end += 1
    assert lines[at] == "    weights:\n"
    models.write_text("".join(lines[:at] + lines[end:]))
    repo = init_repo(denv_repo)
    run = denv(repo, "deploy", "--recipe", "llama-3.1-8b/vllm@1", "--target", "local")
    assert run.returncode == 1 and run.stderr.startswith(
        "model llama-3.1-8b has no weights pinned to a commit in catalog/models.yaml"
    ), run.stderr
    assert git(repo, "branch", "--format=%(refname:short)") == "main"
