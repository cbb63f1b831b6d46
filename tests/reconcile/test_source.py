"""A denv repository read from git: a local path, or a remote URL cloned into a cache and
fetched on each sync; revisions loaded from commits, not from the work tree."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pygit2
import pytest

from reconciler.errors import DenvError
from reconciler.reconcile.source import GitSource, InvalidRevision, is_remote, redact
from reconciler.spec import parsecache
from reconciler.spec.sources import is_trusted_path
from tests.reconcile.conftest import GitRepo


def test_a_local_path_resolves_head_and_loads_commits_not_the_work_tree(git_repo: GitRepo) -> None:
    first = git_repo.git.head.target
    git_repo.replace("releases/chat-8b/denv.yaml", "replicas: 2", "replicas: 3")  # not committed
    source = GitSource(str(git_repo.path / "releases"), git_repo.cache)  # any folder inside
    head = source.resolve()
    assert head == str(first)
    loaded = source.repo_at(head)
    topology = loaded.releases["chat-8b"].release.topology
    assert topology is not None and topology.replicas == 2
    assert source.repo_at(head) is loaded  # one load per revision

    second = git_repo.commit("three replicas")
    assert source.resolve() == second
    assert source.resolve(str(first)[:10]) == str(first)
    assert source.resolve("main") == second


def test_unknown_revisions_and_folders_outside_git_are_clear_errors(
    git_repo: GitRepo, tmp_path_factory: pytest.TempPathFactory
) -> None:
    with pytest.raises(DenvError, match="no commit 'no-such-branch'"):
        git_repo.source().resolve("no-such-branch")
    with pytest.raises(DenvError, match="no commit"):
        git_repo.source().repo_at("0" * 40)
    outside = tmp_path_factory.mktemp("plain")
    with pytest.raises(DenvError, match="not inside a git repository"):
        GitSource(str(outside), git_repo.cache)


def strict(repo: GitRepo, commit: str) -> GitSource:
    """The source a pull request's revision is read from (fleets and policies from
    `commit`): any invalid file refuses the revision, as `denv validate` does."""
    return GitSource(str(repo.path), repo.cache, trusted_base=commit)


def test_a_revision_with_invalid_files_names_revision_file_and_field(git_repo: GitRepo) -> None:
    git_repo.replace("fleets/local.yaml", "trial_gpus: 8", "trial_gpus: many")
    bad = git_repo.commit("break the fleet")
    with pytest.raises(InvalidRevision) as caught:
        strict(git_repo, bad).repo_at(bad)
    message = str(caught.value)
    assert message.startswith(f"revision {bad[:12]} has invalid files:")
    assert "fleets/local.yaml:" in message and "trial_gpus" in message


def test_on_the_default_branch_an_invalid_fleet_holds_that_fleet_only(git_repo: GitRepo) -> None:
    git_repo.replace("fleets/local.yaml", "trial_gpus: 8", "trial_gpus: many")
    bad = git_repo.commit("break the fleet")
    loaded = git_repo.source().repo_at(bad)
    assert "local" not in loaded.fleets and "chat-8b" in loaded.releases
    [problem] = loaded.held["fleet:local"]
    assert problem.path == "fleets/local.yaml" and "trial_gpus" in problem.message


def test_on_the_default_branch_an_invalid_catalog_still_refuses_the_revision(
    git_repo: GitRepo,
) -> None:
    """Every fleet and deployment resolves its hardware: nothing can be planned without it."""
    git_repo.write("catalog/hardware.yaml", "hardware: [\n")
    bad = git_repo.commit("garble the hardware catalog")
    with pytest.raises(InvalidRevision, match=r"catalog/hardware\.yaml:"):
        git_repo.source().repo_at(bad)


def test_an_engine_version_without_a_flag_table_makes_the_revision_invalid(
    git_repo: GitRepo,
) -> None:
    """What `denv validate` refuses is never planned: the reconciler loads the same checks
    (on the default branch, the release they find is held)."""
    git_repo.replace(
        "releases/chat-8b/denv.yaml",
        "settings: { max_batch: 128 }",
        "settings: { max_batch: 128 }\n    engine: { version: 0.11.0 }",
    )
    bad = git_repo.commit("an engine version denv has no flags for")
    with pytest.raises(InvalidRevision) as caught:
        strict(git_repo, bad).repo_at(bad)
    assert "releases/chat-8b/denv.yaml:9:" in str(caught.value)
    assert "vllm 0.11.0 has no flag table in denv" in str(caught.value)
    loaded = git_repo.source().repo_at(bad)
    assert "chat-8b" not in loaded.releases
    assert "no flag table" in loaded.held["release:chat-8b"][0].message


def test_recipe_args_the_engine_refuses_make_the_revision_invalid(git_repo: GitRepo) -> None:
    git_repo.replace(
        "releases/chat-8b/denv.yaml",
        "settings: { max_batch: 128 }",
        'settings: { max_batch: 128 }\n    args: ["--port", "9000"]',
    )
    bad = git_repo.commit("a flag denv sets itself")
    with pytest.raises(InvalidRevision) as caught:
        strict(git_repo, bad).repo_at(bad)
    assert "releases/chat-8b/denv.yaml:9:" in str(caught.value)
    assert "release.overrides.args[0]: --port is set by denv from placement" in str(caught.value)


def _bare_clone(repo: GitRepo, where: Path) -> str:
    pygit2.clone_repository(str(repo.path), str(where), bare=True)
    return f"file://{where}"


def _push(repo: GitRepo, bare: Path) -> None:
    remote = repo.git.remotes.create_anonymous(str(bare))
    remote.push(["+refs/heads/main:refs/heads/main"])


def test_a_remote_url_is_cloned_once_and_fetched_on_each_sync(
    git_repo: GitRepo, tmp_path_factory: pytest.TempPathFactory
) -> None:
    origin = tmp_path_factory.mktemp("origin") / "origin.git"
    url = _bare_clone(git_repo, origin)
    cache = git_repo.cache
    source = GitSource(url, cache)
    source.sync()
    first = source.resolve()
    assert first == str(git_repo.git.head.target)
    assert sorted(p.name for p in cache.iterdir()) == [source.git_dir.name]  # no partial left

    git_repo.replace("releases/chat-8b/denv.yaml", "max_batch: 128", "max_batch: 256")
    second = git_repo.commit("bigger batches")
    _push(git_repo, origin)
    assert source.resolve() == first  # nothing is fetched until the next pass
    again = GitSource(url, cache)  # a new process finds the clone in the cache
    again.sync()
    assert again.resolve() == second
    assert again.resolve("main") == second
    changed = again.repo_at(second).releases["chat-8b"].release.overrides
    assert changed["settings"]["max_batch"] == 256


def test_urls_are_told_apart_from_paths_and_tokens_never_shown(tmp_path: Path) -> None:
    assert is_remote("https://github.com/org/fleet.git")
    assert is_remote("git@github.com:org/fleet.git")
    assert not is_remote("./fleet") and not is_remote("/srv/fleet")
    url = "http://x-access-token:s3cret@127.0.0.1:9/org/fleet.git"
    assert redact(url) == "http://127.0.0.1:9/org/fleet.git"
    source = GitSource(url, tmp_path / "cache")
    with pytest.raises(DenvError) as caught:
        source.sync()  # port 9 on loopback: nothing listens
    assert "s3cret" not in str(caught.value)
    assert str(caught.value).startswith("http://127.0.0.1:9/org/fleet.git: cannot fetch")
    assert not any((tmp_path / "cache").glob("*.git"))


def test_a_later_source_parses_only_the_files_that_changed(
    git_repo: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bot's passes and every command load commits through their own GitSource: YAML
    files an earlier one parsed are read back, not parsed again (keyed by their bytes)."""
    parsed: list[str] = []
    real = parsecache.parse_values

    def counting(path: str, data: bytes) -> Any:
        parsed.append(path)
        return real(path, data)

    monkeypatch.setattr(parsecache, "parse_values", counting)
    first = git_repo.source().repo_at(git_repo.source().resolve())
    assert "releases/chat-8b/denv.yaml" in parsed and len(parsed) > 10
    parsed.clear()
    again = git_repo.source().repo_at(git_repo.source().resolve())
    # fleets and policies are parsed every time, from the bytes of the commit (never cached)
    assert [p for p in parsed if not is_trusted_path(p)] == [] and again.releases == first.releases
    git_repo.replace("releases/chat-8b/denv.yaml", "replicas: 2", "replicas: 3")
    parsed.clear()
    changed = git_repo.source().repo_at(git_repo.commit("three replicas"))
    assert [p for p in parsed if not is_trusted_path(p)] == ["releases/chat-8b/denv.yaml"]
    topology = changed.releases["chat-8b"].release.topology
    assert topology is not None and topology.replicas == 3
