"""Loading a repository from a work tree and from a git commit (blobs, no checkout)."""

from __future__ import annotations

import json
from pathlib import Path

import pygit2
import pytest

from reconciler.errors import DenvError
from reconciler.spec.loader import load_repo, open_repo
from reconciler.spec.sources import GitCommit, WorkTree
from tests.conftest import Edit

RELEASE = "releases/chat-8b/denv.yaml"


def _commit_all(path: Path, message: str) -> str:
    repo = (
        pygit2.Repository(str(path))
        if (path / ".git").exists()
        else pygit2.init_repository(str(path))
    )
    repo.index.add_all()
    repo.index.write()
    tree = repo.index.write_tree()
    author = pygit2.Signature("denv test", "test@denv.invalid")
    parents = [] if repo.head_is_unborn else [repo.head.target]
    return str(repo.create_commit("HEAD", author, author, message, tree, parents))


def test_a_commit_loads_as_it_was_committed(denv_repo: Path, edit: Edit) -> None:
    first = _commit_all(denv_repo, "first")
    edit(RELEASE, "max_batch: 128", "max_batch: 256")
    second = _commit_all(denv_repo, "second")
    edit(RELEASE, "max_batch: 256", "max_batch: 512")  # uncommitted

    def max_batch(repo_rev: str | None) -> object:
        repo = open_repo(denv_repo, repo_rev)
        assert repo.errors == []
        return repo.releases["chat-8b"].release.overrides["settings"]["max_batch"]

    assert max_batch(first) == 128
    assert max_batch(second) == 256
    assert max_batch("HEAD~1") == 128
    assert max_batch(None) == 512


def test_commit_and_work_tree_give_the_same_repo(denv_repo: Path) -> None:
    commit = _commit_all(denv_repo, "all")
    from_tree = load_repo(WorkTree(denv_repo))
    from_git = load_repo(GitCommit(denv_repo, commit))
    assert from_git.recipes == from_tree.recipes
    assert from_git.fleets == from_tree.fleets
    assert from_git.releases == from_tree.releases
    assert from_git.label.endswith(commit[:12])


def test_errors_in_a_commit_name_the_file_and_line(denv_repo: Path, edit: Edit) -> None:
    edit("fleets/local.yaml", "gpus: 16", "gpus: -1")
    commit = _commit_all(denv_repo, "broken")
    edit("fleets/local.yaml", "gpus: -1", "gpus: 16")
    assert open_repo(denv_repo).errors == []
    problems = [str(p) for p in open_repo(denv_repo, commit).errors]
    assert any(
        p.startswith("fleets/local.yaml:11:") and "greater than or equal to 0" in p
        for p in problems
    ), problems


@pytest.mark.parametrize("rev", ["no-such-branch", "0" * 40])
def test_unknown_revision_is_a_clear_error(denv_repo: Path, rev: str) -> None:
    _commit_all(denv_repo, "first")
    with pytest.raises(DenvError, match=f"no commit '{rev}'"):
        open_repo(denv_repo, rev)


def test_not_a_git_repository(tmp_path: Path) -> None:
    with pytest.raises(DenvError, match="not a git repository"):
        GitCommit(tmp_path, "HEAD")


SECRET = "root:$6$not-for-your-eyes:19000:0:99999:7:::"


def test_a_symlink_leaving_the_work_tree_is_refused_unread(denv_repo: Path, tmp_path: Path) -> None:
    outside = tmp_path.parent / f"{tmp_path.name}-outside.yaml"
    outside.write_text(SECRET)
    (denv_repo / "fleets/stolen.yaml").symlink_to(outside)
    (denv_repo / "fleets/inside.yaml").symlink_to(denv_repo / "fleets/local.yaml")

    repo = open_repo(denv_repo)

    [problem] = [p for p in repo.problems if p.path.startswith("fleets/stolen")]
    assert "symbolic link that leaves the repository" in problem.message
    assert not [p for p in repo.problems if SECRET[:10] in p.message]
    assert not [p for p in repo.problems if p.path == "fleets/inside.yaml" and not p.warning]


def test_a_symlink_in_a_commit_is_refused_unread(denv_repo: Path) -> None:
    (denv_repo / "fleets/stolen.yaml").symlink_to("/etc/passwd")
    git_repo = pygit2.init_repository(str(denv_repo), initial_head="main")
    git_repo.index.add_all()
    git_repo.index.write()
    who = pygit2.Signature("t", "t@example.com")
    tree = git_repo.index.write_tree()
    git_repo.create_commit("HEAD", who, who, "with a link", tree, [])

    repo = open_repo(denv_repo, "HEAD")

    [problem] = [p for p in repo.problems if p.path == "fleets/stolen.yaml"]
    assert "symbolic link" in problem.message


def test_a_junk_results_file_stops_after_twenty_errors(denv_repo: Path) -> None:
    (denv_repo / "results").mkdir(exist_ok=True)
    junk = "\n".join(json.dumps({"id": i, "junk": "x" * 50}) for i in range(5000))
    (denv_repo / "results/junk.jsonl").write_text(junk)

    repo = open_repo(denv_repo)

    found = [p for p in repo.problems if p.path == "results/junk.jsonl"]
    assert len(found) == 21
    assert found[-1].message == "stopped after 20 errors: lines 5 to 5,000 were not read"
