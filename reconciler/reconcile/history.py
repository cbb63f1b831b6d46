"""Adapter: release revisions and pins, read from git history (the git adapter).

A release revision is the newest first-parent commit that changed the release's inputs —
everything a stage's deployment resolves from its revision: its `releases/<name>/denv.yaml`,
the recipe files that file names, and the catalog/models.yaml entry of the model those recipes
serve. `promotions.yaml` is not an input, nor is a traffic file or any other file: a commit
elsewhere in the repository leaves the revision (and so what the plan wants, the bake, the
promotion and any rejection of it) where it was. The plan, `denv status` and `denv rollout
status` all take it from here (`GitSource.release_revision`).
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from reconciler.adapters.git import GitRepo, Snapshot
from reconciler.spec.lenient import release_names
from reconciler.spec.paths import promotions_file, recipe_file, release_file
from reconciler.spec.yamlio import parse_yaml, plain

MAX_WALK = 5000  # first-parent commits looked back for the commit that changed a release
CACHED = 256  # (head, release) answers kept per process: a pass asks once per stage


@dataclass(frozen=True)
class ReleaseRevision:
    revision: str  # the commit that changed the release's inputs
    digest: str  # of the inputs' contents: equal digests run the same thing


MODELS = "catalog/models.yaml"


@lru_cache(maxsize=256)
def recipe_model(data: bytes) -> str | None:
    """The model key a recipe file serves, read leniently."""
    doc, problem = parse_yaml("recipe.yaml", data)
    if doc is None or problem is not None:
        return None
    model = doc.get(["recipe", "model"])
    return model if isinstance(model, str) else None


@lru_cache(maxsize=16)
def model_entries(data: bytes) -> Mapping[str, str]:
    """catalog/models.yaml: model id -> a digest of its entry, read leniently (an entry
    changes a release's revision only when it is its model's)."""
    doc, problem = parse_yaml(MODELS, data)
    entries = doc.get(["models"]) if doc is not None and problem is None else None
    found: dict[str, str] = {}
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, dict) and isinstance(entry.get("id"), str):
            text = json.dumps(plain(entry), sort_keys=True, default=str)
            found[entry["id"]] = hashlib.sha256(text.encode()).hexdigest()[:16]
    return found


def inputs(commit: Snapshot, release: str) -> tuple[tuple[str, str], ...]:
    """(path, blob id) of the release file and its recipes, and (`catalog/models.yaml#<model>`,
    entry digest) of the models they serve; empty when there is no release."""
    blob = commit.blob(release_file(release))
    if blob is None:
        return ()
    found = [(release_file(release), str(blob.id))]
    models: set[str] = set()
    for recipe in release_names(blob.data).recipes:
        recipe_blob = commit.blob(recipe_file(recipe))
        found.append((recipe_file(recipe), str(recipe_blob.id) if recipe_blob else "-"))
        model = recipe_model(recipe_blob.data) if recipe_blob is not None else None
        if model is not None:
            models.add(model)
    catalog = commit.blob(MODELS) if models else None
    entries = model_entries(catalog.data) if catalog is not None else {}
    found += [(f"{MODELS}#{model}", entries.get(model, "-")) for model in sorted(models)]
    return tuple(found)


def _digest(key: tuple[tuple[str, str], ...]) -> str:
    return hashlib.sha256(repr(key).encode()).hexdigest()[:16]


class History:
    """Release revisions of one repository (cached by head: history never changes)."""

    def __init__(self, git_dir: Path) -> None:
        self.repo = GitRepo.open(git_dir)
        self._cache: OrderedDict[tuple[str, str, int], list[ReleaseRevision]] = OrderedDict()

    def _first_parents(self, commit: str) -> Iterator[Snapshot]:
        return self.repo.first_parents(commit, MAX_WALK)

    def revisions(self, head: str, release: str, count: int = 1) -> list[ReleaseRevision]:
        """The release's last `count` revisions up to `head`, newest first (fewer when the
        release is younger; none when `head` has no such release)."""
        cached = self._cache.get((head, release, count))
        if cached is not None:
            return cached
        found: list[ReleaseRevision] = []
        key: tuple[tuple[str, str], ...] | None = None
        oldest = ""
        for commit in self._first_parents(head):
            current = inputs(commit, release)
            if current != key:
                if key:
                    found.append(ReleaseRevision(oldest, _digest(key)))
                if not current or len(found) >= count:
                    key = None
                    break
                key = current
            oldest = commit.id
        if key:
            found.append(ReleaseRevision(oldest, _digest(key)))
        self._cache[(head, release, count)] = found
        if len(self._cache) > CACHED:
            self._cache.popitem(last=False)
        return found

    def digest_at(self, commit: str, release: str) -> str | None:
        """The digest of the release's inputs at `commit` (a pinned revision)."""
        found = self.repo.lookup(commit)
        if found is None:
            return None
        key = inputs(found, release)
        return _digest(key) if key else None

    def pins(self, head: str, release: str, stage: str, count: int = 8) -> list[str]:
        """The revisions pinned for `stage`, newest first, as the first-parent history of
        promotions.yaml says (consecutive repeats once)."""
        found: list[str] = []
        path = promotions_file(release)
        for commit in self._first_parents(head):
            blob = commit.blob(path)
            pin = _pin(blob.data, stage) if blob is not None else None
            if pin and (not found or found[-1] != pin):
                found.append(pin)
                if len(found) >= count:
                    break
        return found

    def restore(self, release: str, head: str, target: str) -> dict[str, bytes]:
        """The release file, and those of its recipe files that differ at `head`, as they are
        at `target`: what a revert of the release to `target` writes."""
        old, new = self.repo.lookup(target), self.repo.lookup(head)
        if old is None or new is None:
            return {}
        now = dict(inputs(new, release))
        found: dict[str, bytes] = {}
        for path, blob in inputs(old, release):
            data = self.read(target, path)
            if data is not None and (path == release_file(release) or now.get(path) != blob):
                found[path] = data
        return found

    def read(self, commit: str, path: str) -> bytes | None:
        found = self.repo.lookup(commit)
        blob = found.blob(path) if found is not None else None
        return blob.data if blob is not None else None


def _pin(data: bytes, stage: str) -> str | None:
    doc, problem = parse_yaml("promotions.yaml", data)
    if doc is None or problem is not None:
        return None
    revision = doc.get(["promotions", stage, "revision"])
    return revision if isinstance(revision, str) else None
