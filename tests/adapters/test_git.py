"""The git adapter against real repositories made with pygit2: what the rest of denv reads and
writes through it, with no pygit2 type crossing its edge."""

from __future__ import annotations

from pathlib import Path

import pygit2
import pytest

from reconciler.adapters.git import Author, GitFailure, GitRepo
from reconciler.errors import DenvError, ForgeError

WHO = pygit2.Signature("someone", "someone@denv.invalid", 1_700_000_000, 0)


def commit(repo: pygit2.Repository, files: dict[str, bytes], message: str) -> str:
    """Commit `files` (whole tree) on HEAD."""
    index = pygit2.Index()
    for path, data in files.items():
        index.add(pygit2.IndexEntry(path, repo.create_blob(data), pygit2.enums.FileMode.BLOB))
    parents = [] if repo.head_is_unborn else [repo.head.target]
    return str(repo.create_commit("HEAD", WHO, WHO, message, index.write_tree(repo), parents))


@pytest.fixture
def made(tmp_path: Path) -> tuple[Path, list[str]]:
    repo = pygit2.init_repository(str(tmp_path / "r"), initial_head="main")
    first = commit(repo, {"releases/a/denv.yaml": b"a: 1\n", "README": b"hi\n"}, "first")
    second = commit(
        repo,
        {"releases/a/denv.yaml": b"a: 2\n", "releases/b/denv.yaml": b"b\n", "README": b"hi\n"},
        "second\n\nbody",
    )
    return tmp_path / "r", [first, second]


def test_a_commit_reads_as_files_without_a_checkout(made: tuple[Path, list[str]]) -> None:
    root, (first, second) = made
    repo = GitRepo.open(root)
    head = repo.revparse("main")
    assert head.id == second and head.message == "second\n\nbody"
    assert list(head.files("releases")) == ["releases/a/denv.yaml", "releases/b/denv.yaml"]
    assert head.folders("releases") == ["a", "b"]
    assert head.folders("README") == [] and list(head.files("nowhere")) == []
    blob = head.blob("releases/a/denv.yaml")
    assert blob is not None and blob.data == b"a: 2\n" and not blob.link
    assert head.blob("releases") is None and head.blob("missing/file") is None
    assert [c.id for c in repo.first_parents(second, 10)] == [second, first]
    assert [c.id for c in repo.first_parents(second, 1)] == [second]
    assert repo.lookup("0" * 40) is None and repo.commit("no-such-branch") is None
    with pytest.raises(GitFailure):
        repo.revparse("no-such-branch")


def test_merge_base_and_changed_paths(made: tuple[Path, list[str]]) -> None:
    root, (first, second) = made
    repo = GitRepo.open(root)
    assert repo.merge_base(first, second) == first
    assert repo.descendant_of(second, first) and not repo.descendant_of(first, second)
    assert repo.changed_paths(first, second) == ["releases/a/denv.yaml", "releases/b/denv.yaml"]
    assert repo.changed_paths(None, first) == ["README", "releases/a/denv.yaml"]


def test_commits_are_written_from_files_in_memory(made: tuple[Path, list[str]]) -> None:
    root, (first, second) = made
    repo = GitRepo.open(root)
    tree = repo.tree_with(second, {"recipes/x.yaml": b"x\n"})
    bot = Author("denv-bot", "bot@denv.invalid")
    made_commit = repo.create_commit(tree, [second], bot, "add x")
    assert repo.branch_tip("main") == second  # no ref moved
    repo.set_branch("bot", made_commit)
    assert repo.branch_tip("bot") == made_commit and repo.branch_tip("nope") is None
    snapshot = repo.revparse("bot")
    assert snapshot.tree_id == tree and snapshot.blob("recipes/x.yaml") is not None
    found = repo.commits_between(made_commit, first)
    assert [(c.id, c.author) for c in found] == [
        (made_commit, bot),
        (second, Author("someone", "someone@denv.invalid")),
    ]
    assert repo.merged_tree(second, made_commit) == tree


def test_a_folder_that_is_no_repository_is_named_with_the_callers_error(tmp_path: Path) -> None:
    with pytest.raises(ForgeError, match="not a git repository"):
        GitRepo.open(tmp_path / "nothing", ForgeError)
    with pytest.raises(DenvError, match="not inside a git repository"):
        GitRepo.discover(tmp_path)
