"""Adapter: the denv repository the reconciler reads, in git — a local path, or a remote URL
that is cloned (bare) into a cache folder once and fetched on every `sync()`.

Nothing is read from a work tree: each revision is loaded from its commit's blobs, so stages
pinned to different revisions load side by side, and what a plan says is what git says.
"""

from __future__ import annotations

import hashlib
import re
import shutil
from collections import OrderedDict
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pygit2

from reconciler.engines.recipe_args import check_engines
from reconciler.errors import DenvError, Problem, SpecError
from reconciler.reconcile.history import History
from reconciler.reconcile.revisions import Stages, stage_revisions
from reconciler.spec.loader import open_repo
from reconciler.spec.parsecache import ParseCache
from reconciler.spec.repo import Repo
from reconciler.spec.yamlio import parse_yaml

_SCP_LIKE = re.compile(r"^[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:")  # git@github.com:org/repo.git
CACHED_REVISIONS = 16  # loaded revisions kept in memory: the head and the stages' pins
HISTORY_DEPTH = 200  # commits looked back for fleets a removed release may still run on


def is_remote(location: str) -> bool:
    return "://" in location or bool(_SCP_LIKE.match(location))


def redact(location: str) -> str:
    """A location fit for messages: a token in the URL's user part is left out."""
    if "://" not in location:
        return location
    parts = urlsplit(location)
    host = parts.hostname or ""
    netloc = host + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


class InvalidRevision(SpecError):
    """A revision whose files do not validate: nothing of it is deployed."""

    def __init__(self, revision: str, problems: list[Problem]) -> None:
        super().__init__(problems)
        self.revision = revision
        self.args = (f"revision {revision[:12]} has invalid files:\n{self.args[0]}",)


class GitSource:
    """One denv repository in git, and its revisions loaded as `Repo`s (cached by commit)."""

    def __init__(
        self,
        location: str,
        cache_dir: Path,
        branch: str | None = None,
        trusted_base: str | None = None,
    ) -> None:
        self.location = location
        # A pull request's revisions: fleets and policies are read from this base commit.
        self.trusted_base = trusted_base
        self.label = redact(location)
        self.remote = is_remote(location)
        self.branch = branch  # None: the remote's default branch, or a local path's HEAD
        self._loaded: OrderedDict[str, Repo] = OrderedDict()
        # YAML files parsed by an earlier pass or command are not parsed again (keyed by
        # their bytes): most of a pass's time went to parsing the same files anew
        self._parsed = ParseCache(cache_dir / "parsed")
        self._history: History | None = None  # opened once the repository is there
        if self.remote:
            digest = hashlib.sha256(location.encode()).hexdigest()[:16]
            self.git_dir = cache_dir / f"{digest}.git"
        else:
            found = pygit2.discover_repository(str(Path(location).resolve()))
            if found is None:
                raise DenvError(f"{location}: not inside a git repository")
            self.git_dir = Path(found)

    def sync(self) -> None:
        """Clone a remote once, then fetch it; a local repository is read as it is."""
        if not self.remote:
            return
        try:
            if (self.git_dir / "HEAD").exists():
                pygit2.Repository(str(self.git_dir)).remotes["origin"].fetch()
                return
            # Clone beside the cache, then rename: a clone killed halfway leaves no cache.
            partial = self.git_dir.with_name(self.git_dir.name + ".partial")
            shutil.rmtree(partial, ignore_errors=True)
            partial.parent.mkdir(parents=True, exist_ok=True)
            pygit2.clone_repository(self.location, str(partial), bare=True)
            partial.rename(self.git_dir)
        except (pygit2.GitError, KeyError, OSError) as exc:
            # libgit2's messages can quote the URL; say it once, redacted, and keep the cause.
            cause = str(exc).replace(self.location, self.label)
            raise DenvError(f"{self.label}: cannot fetch: {cause}") from exc

    def resolve(self, rev: str | None = None) -> str:
        """The commit id of `rev` (a branch, tag or commit), or of the branch followed."""
        repo = pygit2.Repository(str(self.git_dir))
        if self.remote:
            wanted = rev or self.branch or "HEAD"
            names = [f"refs/remotes/origin/{wanted}", wanted]
        else:
            names = [rev or self.branch or "HEAD"]
        for name in names:
            try:
                return str(repo.revparse_single(name).peel(pygit2.Commit).id)
            except (KeyError, ValueError, pygit2.GitError):
                continue
        raise DenvError(f"{self.label}: no commit '{names[-1]}'")

    def repo_at(self, commit: str) -> Repo:
        """The repository's files at `commit`, validated; InvalidRevision when they are not."""
        if commit in self._loaded:
            self._loaded.move_to_end(commit)
            return self._loaded[commit]
        loaded = open_repo(self.git_dir, commit, self.trusted_base, cache=self._parsed)
        loaded.problems.extend(check_engines(loaded))
        if loaded.errors:
            raise InvalidRevision(commit, loaded.errors)
        self._loaded[commit] = loaded
        if len(self._loaded) > CACHED_REVISIONS:
            self._loaded.popitem(last=False)
        return loaded

    @property
    def history(self) -> History:
        """Release revisions and pins from this repository's history (cached by head)."""
        if self._history is None:
            self._history = History(self.git_dir)
        return self._history

    def release_revision(self, head: str, release: str) -> str | None:
        """The release's revision at `head`: the last first-parent commit that changed its
        inputs (reconcile/history.py); None when `head` has no such release."""
        found = self.history.revisions(head, release)
        return found[0].revision if found else None

    def stages(self, head: str) -> Stages:
        """Every stage of every release at `head` with the revision it runs: the first stage
        its release revision, later stages their pins."""
        loaded = self.repo_at(head)
        revisions = {name: self.release_revision(head, name) or head for name in loaded.releases}
        return stage_revisions(loaded, head, revisions)

    def read(self, commit: str, path: str) -> bytes | None:
        """One file's bytes at `commit`, None when it is not there."""
        repo = pygit2.Repository(str(self.git_dir))
        found = repo.get(commit)
        if not isinstance(found, pygit2.Commit):
            return None
        try:
            blob = found.tree / path
        except KeyError:
            return None
        return blob.data if isinstance(blob, pygit2.Blob) else None

    def recent_fleets(self, commit: str, depth: int = HISTORY_DEPTH) -> set[str]:
        """Fleets the releases named in the last `depth` first-parent commits up to `commit`:
        where units of a release removed since may still run (the bot keeps no state of its
        own, so history is how it finds them)."""
        repo = pygit2.Repository(str(self.git_dir))
        found: set[str] = set()
        start = repo.get(commit)
        current = start if isinstance(start, pygit2.Commit) else None
        for _ in range(depth):
            if current is None:
                break
            found |= _release_fleets(repo, current)
            current = current.parents[0] if current.parents else None
        return found


def _release_fleets(repo: pygit2.Repository, commit: pygit2.Commit) -> set[str]:
    """Stage fleet names in releases/*/denv.yaml of one commit (read leniently: a broken file
    names no fleet)."""
    try:
        releases = commit.tree / "releases"
    except KeyError:
        return set()
    if not isinstance(releases, pygit2.Tree):
        return set()
    names: set[str] = set()
    for entry in releases:
        try:
            blob = repo.get((entry / "denv.yaml").id) if isinstance(entry, pygit2.Tree) else None
        except KeyError:
            continue
        if not isinstance(blob, pygit2.Blob):
            continue
        doc, problem = parse_yaml("denv.yaml", blob.data)
        stages = doc.data.get("stages") if doc is not None and problem is None else None
        for stage in stages if isinstance(stages, list) else []:
            fleets = stage.get("fleets") if isinstance(stage, dict) else None
            if isinstance(fleets, list):
                names |= {f for f in fleets if isinstance(f, str)}
    return names
