"""`denv pr bench` and `denv pr commands`: what a pull request changes (pure, against real
repository files), the commands comment that makes each `/denv` command run once, and on the
local forge a bench whose candidate cannot start (the check fails, nothing is left running),
a `/denv plan` comment run through the CLI, and a bench whose result files `--out` writes as
`denv bench run` does."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from reconciler.bench.pr_subjects import bench_subjects
from reconciler.bench.results import read_result
from reconciler.bench.trial_sweep import Load
from reconciler.fleet.drivers.registry import Drivers
from reconciler.fleet.hostagent import AgentClient
from reconciler.fleet.transport import LocalTransport
from reconciler.forge.comments import render
from reconciler.forge.handled import Handled, pending, read_handled
from reconciler.forge.kinds.commands import CommandsView
from reconciler.forge.local import LocalForge
from reconciler.forge.models import Comment, CommentCommand
from reconciler.pr.bench import BenchOptions, _Runner
from reconciler.spec.loader import open_repo
from reconciler.spec.repo import Repo
from tests.conftest import ROOT
from tests.forge.gitrepo import commit_file, git
from tests.labs.workspace import copy_denv_files
from tests.pr.test_plan import denv

EXPECTED = Path(__file__).parents[1] / "forge" / "expected"  # golden files of the templates
RELEASE = "releases/chat-8b/denv.yaml"
RECIPE = "llama-3.1-8b/vllm@1"


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Repo:
    """This repository's denv files, loaded once; each case changes a copy in memory."""
    return open_repo(copy_denv_files(tmp_path_factory.mktemp("base")))


def _release_settings(repo: Repo) -> Repo:
    chat = repo.releases["chat-8b"]
    body = chat.release.model_copy(update={"overrides": {"settings": {"max_batch": 192}}})
    return replace(
        repo, releases={**repo.releases, "chat-8b": chat.model_copy(update={"release": body})}
    )


def _recipe(repo: Repo, recipe_id: str, new_id: str) -> Repo:
    recipe = repo.recipes[recipe_id]
    settings = recipe.settings.model_copy(update={"chunked_prefill": 4096})
    changed = recipe.model_copy(update={"id": new_id, "settings": settings})
    return replace(repo, recipes={**repo.recipes, new_id: changed})


CHANGES: dict[str, Callable[[Repo], Repo]] = {
    "nothing": lambda repo: repo,
    "release settings": _release_settings,
    "recipe a release runs": lambda repo: _recipe(repo, RECIPE, RECIPE),
    "new release": lambda repo: replace(
        repo, releases={**repo.releases, "second": repo.releases["chat-8b"]}
    ),
    "new recipe": lambda repo: _recipe(repo, RECIPE, "llama-3.1-8b/vllm@2"),
}
FOUND = {
    "nothing": [],
    "release settings": [("release", "chat-8b", "local", "chat-8b")],
    "recipe a release runs": [("release", "chat-8b", "local", "chat-8b")],
    "new release": [("release", "second", "local", None)],
    # a recipe no release runs: on each fleet of its hardware with trial GPUs, against the
    # release serving its model there (none on h200-use1, where it is new)
    "new recipe": [
        ("recipe", "llama-3.1-8b/vllm@2", "h200-use1", None),
        ("recipe", "llama-3.1-8b/vllm@2", "local", "chat-8b"),
    ],
}


@pytest.mark.parametrize("change", list(CHANGES), ids=list(CHANGES))
def test_what_a_pull_request_changes(change: str, base: Repo) -> None:
    subjects = bench_subjects(base, CHANGES[change](base))
    found = [(s.kind, s.name, s.fleet, s.current.label if s.current else None) for s in subjects]
    assert found == FOUND[change]
    for subject in subjects:  # parity compares recipes on the current release's weights
        if subject.current is not None:
            assert subject.candidate.weights == subject.current.weights


def test_a_release_subject_holds_both_resolved_recipes(base: Repo) -> None:
    [subject] = bench_subjects(base, _release_settings(base))
    assert subject.current is not None
    assert subject.current.recipe.settings.max_batch == 128
    assert subject.candidate.recipe.settings.max_batch == 192
    assert subject.candidate.recipe.topology.replicas == 2  # the release's topology


AT = datetime(2025, 1, 1, tzinfo=UTC)


def _command(comment_id: int, kind: str = "bench") -> CommentCommand:
    return CommentCommand(comment_id=comment_id, user="grace", command=kind, args=[], at=AT)


def test_commands_run_once_and_the_comment_says_what_came_of_them() -> None:
    handled = [
        Handled(comment_id=7, user="grace", command="plan", outcome="check 'denv plan' success"),
        Handled(comment_id=9, user="ada", command="bench", outcome="failed: x --> y"),
    ]
    body = render(CommandsView(handled=handled))
    assert body == (EXPECTED / "commands.md").read_text()
    comments = [
        Comment(id=1, author="denv-bot", body=body, at=AT),
        Comment(id=2, author="mallory", body="<!-- denv:commands -->\nno list here", at=AT),
    ]
    assert read_handled(comments) == handled
    commands = [_command(7), _command(9), _command(11), _command(12, "plan")]
    assert [c.comment_id for c in pending(commands, handled)] == [11, 12]
    assert [c.comment_id for c in pending(commands, handled, only=12)] == [12]
    assert pending(commands, handled, only=9) == []


def test_sweeps_started_in_one_second_are_stamped_apart(base: Repo) -> None:
    """Result ids hold the sweep's start to the second, and both sides of a release often have
    one recipe id: a side swept within the second of the one before is stamped a second on."""
    times = iter([AT.replace(microsecond=900), AT.replace(microsecond=999_999), AT])
    options, load = BenchOptions(), Load(traffic=[], levels=[1.0])
    runner = _Runner(base, options, load, Drivers(), lambda: next(times), lambda _: None)
    assert [runner.start() for _ in range(3)] == [AT + timedelta(seconds=s) for s in (0, 1, 2)]


# A release whose engines cannot start: the weights (16 GB) do not fit in 5 % of an H200.
NO_ROOM = "settings: { max_batch: 128, kv_cache: { memory_fraction: 0.05 } }"


def _trial_units(repo: Path) -> list[str]:
    home = repo.parent / f"{repo.name}-state" / "home"
    agent = AgentClient(
        LocalTransport(env={**os.environ, "DENV_HOME": str(home)}), python=sys.executable
    )
    return [u.id for u in agent.units() if u.alive and u.id.startswith("trial-")]


def _release_pr(repo: Path, branch: str, settings: str) -> tuple[int, str]:
    """A pull request on the local forge that gives chat-8b other settings: (number, head)."""
    text = (repo / RELEASE).read_text().replace("settings: { max_batch: 128 }", settings)
    git(repo, "checkout", "-q", "-b", branch)
    head = commit_file(repo, RELEASE, text, f"chat-8b: {branch}")
    git(repo, "checkout", "-q", "main")
    return LocalForge(repo).open_pr(branch, f"chat-8b: {branch}").number, head


def _short_trace(folder: Path) -> Path:
    trace = folder / "short.jsonl"
    line = {"timestamp": 0, "input_length": 600, "output_length": 8, "hash_ids": [1, 2]}
    trace.write_text(json.dumps(line) + "\n")
    return trace


def _bench(repo: Path, number: int, trace: Path, *more: str) -> dict[str, Any]:
    run = denv(
        repo, "bench", "--pr", str(number), "--traffic", str(trace),
        "--concurrency", "1", "--requests", "2", "--ready-timeout", "60s", *more, "--json",
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    answer: dict[str, Any] = json.loads(run.stdout)
    return answer


def test_a_bench_whose_candidate_cannot_start_fails_its_check(
    git_repo: Path, tmp_path: Path
) -> None:
    number, head = _release_pr(git_repo, "no-room", NO_ROOM)
    forge = LocalForge(git_repo)
    answer = _bench(git_repo, number, _short_trace(tmp_path))
    [failed] = answer["runs"]
    assert failed["subject"]["name"] == "chat-8b" and "exited" in failed["error"]
    check = answer["check"]
    assert (check["conclusion"], check["title"]) == ("failure", "1 run failed of 1 (simulated)")
    [bench] = [c.body for c in forge.comments(number) if c.body.startswith("<!-- denv:bench")]
    assert f"### denv bench for `{head[:12]}`" in bench
    assert "- **chat-8b on local failed**:\n\n  ```\n" in bench  # its engine, quoted
    assert _trial_units(git_repo) == []  # both sides torn down

    # `/denv plan` on the local forge, through `denv pr commands`
    asked = forge.comment(number, "/denv plan", author="grace").id
    run = denv(git_repo, "commands", "--pr", str(number), "--json")
    assert run.returncode == 0, run.stderr
    [ran] = json.loads(run.stdout)["ran"]
    assert (ran["comment_id"], ran["command"]) == (asked, "plan")
    assert ran["outcome"].startswith("check 'denv plan' success")


def test_out_writes_both_sides_result_files_as_bench_run_does(
    git_repo: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    number, _ = _release_pr(git_repo, "bigger-batch", "settings: { max_batch: 192 }")
    tmp_path = tmp_path_factory.mktemp("operator")  # a suite file outside the checkout
    suite = tmp_path / "parity-small.jsonl"
    prompts = (ROOT / "policies/parity/default.jsonl").read_text().splitlines()[:2]
    suite.write_text("\n".join(prompts) + "\n")
    out = tmp_path / "out"
    trace = _short_trace(tmp_path)
    answer = _bench(git_repo, number, trace, "--suite", str(suite), "--out", str(out))
    assert answer["check"]["conclusion"] == "success", answer["check"]
    [run] = answer["runs"]
    files = sorted(out.glob("results/*/*/*/*.json"))
    assert sorted(answer["written"]) == [str(f) for f in files]
    results = [read_result(f) for f in files]
    assert len(results) == 2  # one level a side: the current release's, then the pull request's
    for path, result, side in zip(files, results, ("current", "candidate"), strict=True):
        assert result.model_dump(mode="json") == run[side][0]  # as the comment and --json have it
        assert path.relative_to(out).parts[:-1] == ("results", *RECIPE.split("/"), "h200")
        assert (result.source.kind, result.source.by) == ("simulated", "denv pr bench")
    assert results[0].recipe.digest != results[1].recipe.digest  # max_batch 128, then 192
