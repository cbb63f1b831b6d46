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
from collections.abc import Collection
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from reconciler.adapters.git import GitFailure, GitRepo, Snapshot
from reconciler.engines.recipe_args import check_engines
from reconciler.errors import DenvError, Problem, SpecError
from reconciler.fleet.model.labels import DeploymentKey
from reconciler.reconcile.history import History
from reconciler.reconcile.orphans import Removal, RetiredFleet, removal
from reconciler.reconcile.revisions import Stages, stage_revisions
from reconciler.spec.bounds import max_bytes
from reconciler.spec.fleet import Fleet
from reconciler.spec.isolation import isolate
from reconciler.spec.lenient import release_names
from reconciler.spec.loader import open_repo
from reconciler.spec.parsecache import ParseCache
from reconciler.spec.paths import release_file
from reconciler.spec.repo import Repo

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
        # A pull request's revisions: fleets and policies are read from this commit, the
        # default branch's tip (forge/trusted.py).
        self.trusted_base = trusted_base
        # The default branch's revisions are merged already: an invalid file there holds only
        # what reads it (spec/isolation.py). A pull request's are refused whole, as
        # `denv validate` refuses them: it must not add a broken file.
        self.isolates = trusted_base is None
        self.label = redact(location)
        self.remote = is_remote(location)
        self.branch = branch  # None: the remote's default branch, or a local path's HEAD
        self._loaded: OrderedDict[str, Repo] = OrderedDict()
        # YAML files parsed by an earlier pass or command are not parsed again (keyed by
        # their bytes): most of a pass's time went to parsing the same files anew
        self._parsed = ParseCache(cache_dir / "parsed")
        self._history: History | None = None  # opened once the repository is there
        self._removals: dict[tuple[str, DeploymentKey], Removal] = {}  # (head, deployment)
        # the last head's retired fleets: (head, names) and what they are
        self._retired: tuple[tuple[str, frozenset[str]], dict[str, RetiredFleet]] | None = None
        if self.remote:
            digest = hashlib.sha256(location.encode()).hexdigest()[:16]
            self.git_dir = cache_dir / f"{digest}.git"
        else:
            resolved = Path(location).resolve()
            try:
                self.git_dir = GitRepo.discover(resolved).git_dir
            except DenvError:
                raise DenvError(f"{location}: not inside a git repository") from None

    def sync(self) -> None:
        """Clone a remote once, then fetch it; a local repository is read as it is."""
        if not self.remote:
            return
        try:
            if (self.git_dir / "HEAD").exists():
                GitRepo.open(self.git_dir).fetch_origin()
                return
            # Clone beside the cache, then rename: a clone killed halfway leaves no cache.
            partial = self.git_dir.with_name(self.git_dir.name + ".partial")
            shutil.rmtree(partial, ignore_errors=True)
            partial.parent.mkdir(parents=True, exist_ok=True)
            GitRepo.clone_bare(self.location, partial)
            partial.rename(self.git_dir)
        except (GitFailure, OSError) as exc:
            # libgit2's messages can quote the URL; say it once, redacted, and keep the cause.
            cause = str(exc).replace(self.location, self.label)
            raise DenvError(f"{self.label}: cannot fetch: {cause}") from exc

    def resolve(self, rev: str | None = None) -> str:
        """The commit id of `rev` (a branch, tag or commit), or of the branch followed."""
        repo = GitRepo.open(self.git_dir)
        if self.remote:
            wanted = rev or self.branch or "HEAD"
            names = [f"refs/remotes/origin/{wanted}", wanted]
        else:
            names = [rev or self.branch or "HEAD"]
        for name in names:
            found = repo.commit(name)
            if found is not None:
                return found.id
        raise DenvError(f"{self.label}: no commit '{names[-1]}'")

    def uncommitted(self) -> list[str]:
        """Paths where a local work tree differs from the HEAD it follows (what a plan of HEAD
        leaves out); [] for a remote, a named branch or a bare repository."""
        if self.remote or self.branch is not None:
            return []
        return GitRepo.open(self.git_dir).uncommitted()

    def worktree_problems(self) -> list[Problem]:
        """The errors of a local work tree's files, validated as a commit's would be."""
        workdir = GitRepo.open(self.git_dir).workdir
        if self.remote or workdir is None:
            return []
        loaded = open_repo(workdir)
        loaded.problems.extend(check_engines(loaded))
        return loaded.errors

    def repo_at(self, commit: str) -> Repo:
        """The repository's files at `commit`, validated; InvalidRevision when they are not.
        Where the source `isolates`, only errors that hold everything refuse the revision;
        what the others hold is left out of it and named in `Repo.held`."""
        if commit in self._loaded:
            self._loaded.move_to_end(commit)
            return self._loaded[commit]
        loaded = open_repo(self.git_dir, commit, self.trusted_base, cache=self._parsed)
        loaded.problems.extend(check_engines(loaded))
        refused = isolate(loaded) if self.isolates else loaded.errors
        if refused:
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
        found = GitRepo.open(self.git_dir).lookup(commit)
        blob = found.blob(path, max_bytes(path)) if found is not None else None
        return blob.data if blob is not None else None

    def recent_fleets(self, commit: str, depth: int = HISTORY_DEPTH) -> set[str]:
        """Fleets the releases named in the last `depth` first-parent commits up to `commit`:
        where units of a release removed since may still run (the bot keeps no state of its
        own, so history is how it finds them)."""
        found: set[str] = set()
        for current in GitRepo.open(self.git_dir).first_parents(commit, depth):
            found |= _release_fleets(current)
        return found

    def retired_fleets(
        self, commit: str, names: Collection[str], depth: int = HISTORY_DEPTH
    ) -> dict[str, RetiredFleet]:
        """The fleets of `names` whose file `fleets/NAME.yaml` a commit of the last `depth`
        first-parent ones up to `commit` removed, each with its last version. None for a pull
        request's revisions: where denv connects comes from the default branch's head only."""
        if self.trusted_base is not None:
            return {}
        key = (commit, frozenset(names))
        if self._retired is None or self._retired[0] != key:  # a bot passes over one head
            self._retired = key, self._find_retired(commit, set(names), depth)
        return self._retired[1]

    def _find_retired(self, commit: str, wanted: set[str], depth: int) -> dict[str, RetiredFleet]:
        found: dict[str, RetiredFleet] = {}
        newer: str | None = None
        searched = 0
        for current in GitRepo.open(self.git_dir).first_parents(commit, depth):
            searched += 1
            for name in sorted(wanted):
                if current.stat(f"fleets/{name}.yaml") is None:
                    continue
                wanted.discard(name)
                if newer is not None:  # at the head itself: not removed (held, if invalid)
                    gone = Removal(removed_in=newer, last_with=current.id, searched=searched)
                    found[name] = RetiredFleet(name, gone, self._fleet_at(current.id, name))
            if not wanted:
                break
            newer = current.id
        return found

    def _fleet_at(self, commit: str, name: str) -> Fleet | None:
        try:
            return self.repo_at(commit).fleets.get(name)
        except (InvalidRevision, DenvError):
            return None

    def removals(
        self, commit: str, keys: set[DeploymentKey], depth: int = HISTORY_DEPTH
    ) -> dict[DeploymentKey, Removal]:
        """For each deployment of `keys`, the commit of the last `depth` first-parent ones up
        to `commit` that removed it (reconcile/orphans.py)."""
        found = {}
        for key in keys:
            if (commit, key) not in self._removals:  # a bot passes over the same head
                walk = GitRepo.open(self.git_dir).first_parents(commit, depth)
                history = ((current.id, _deployments(current)) for current in walk)
                self._removals[(commit, key)] = removal(history, key)
            found[key] = self._removals[(commit, key)]
        return found


def _deployments(commit: Snapshot) -> set[DeploymentKey]:
    """(release, stage, fleet) of every stage's fleets in one commit's release files (read
    leniently: a broken file names none)."""
    found: set[DeploymentKey] = set()
    for release in commit.folders("releases"):
        blob = commit.blob(release_file(release))
        if blob is not None:
            found |= {(release, s, f) for s, f in release_names(blob.data).deployments}
    return found


def _release_fleets(commit: Snapshot) -> set[str]:
    """Stage fleet names in releases/*/denv.yaml of one commit (read leniently: a broken file
    names no fleet)."""
    names: set[str] = set()
    for release in commit.folders("releases"):
        blob = commit.blob(release_file(release))
        if blob is not None:
            names |= set(release_names(blob.data).fleets)
    return names
