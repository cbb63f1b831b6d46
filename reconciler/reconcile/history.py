"""Adapter: release revisions and pins, read from git history with pygit2.

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

import pygit2

from reconciler.spec.yamlio import parse_yaml, plain

MAX_WALK = 5000  # first-parent commits looked back for the commit that changed a release
CACHED = 256  # (head, release) answers kept per process: a pass asks once per stage


@dataclass(frozen=True)
class ReleaseRevision:
    revision: str  # the commit that changed the release's inputs
    digest: str  # of the inputs' contents: equal digests run the same thing


def _blob(tree: pygit2.Tree, path: str) -> pygit2.Blob | None:
    try:
        found = tree / path
    except KeyError:
        return None
    return found if isinstance(found, pygit2.Blob) else None


MODELS = "catalog/models.yaml"


@lru_cache(maxsize=256)  # history walks see the same blobs commit after commit
def recipe_ids(data: bytes) -> tuple[str, ...]:
    """Recipe ids a release file names (its recipe and per-fleet ones), read leniently."""
    doc, problem = parse_yaml("denv.yaml", data)
    if doc is None or problem is not None or not isinstance(doc.data, dict):
        return ()
    found: set[str] = set()
    body = doc.data.get("release")
    if isinstance(body, dict) and isinstance(body.get("recipe"), str):
        found.add(body["recipe"])
    stages = doc.data.get("stages")
    for stage in stages if isinstance(stages, list) else []:
        recipes = stage.get("recipes") if isinstance(stage, dict) else None
        if isinstance(recipes, dict):
            found |= {r for r in recipes.values() if isinstance(r, str)}
    return tuple(sorted(found))


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


def release_file(release: str) -> str:
    return f"releases/{release}/denv.yaml"


def recipe_file(recipe: str) -> str:
    return f"recipes/{recipe}.yaml"


def inputs(tree: pygit2.Tree, release: str) -> tuple[tuple[str, str], ...]:
    """(path, blob id) of the release file and its recipes, and (`catalog/models.yaml#<model>`,
    entry digest) of the models they serve; empty when there is no release."""
    blob = _blob(tree, release_file(release))
    if blob is None:
        return ()
    found = [(release_file(release), str(blob.id))]
    models: set[str] = set()
    for recipe in recipe_ids(blob.data):
        recipe_blob = _blob(tree, recipe_file(recipe))
        found.append((recipe_file(recipe), str(recipe_blob.id) if recipe_blob else "-"))
        model = recipe_model(recipe_blob.data) if recipe_blob is not None else None
        if model is not None:
            models.add(model)
    catalog = _blob(tree, MODELS) if models else None
    entries = model_entries(catalog.data) if catalog is not None else {}
    found += [(f"{MODELS}#{model}", entries.get(model, "-")) for model in sorted(models)]
    return tuple(found)


def _digest(key: tuple[tuple[str, str], ...]) -> str:
    return hashlib.sha256(repr(key).encode()).hexdigest()[:16]


class History:
    """Release revisions of one repository (cached by head: history never changes)."""

    def __init__(self, git_dir: Path) -> None:
        self.repo = pygit2.Repository(str(git_dir))
        self._cache: OrderedDict[tuple[str, str, int], list[ReleaseRevision]] = OrderedDict()

    def _first_parents(self, commit: str) -> Iterator[pygit2.Commit]:
        found = self.repo.get(commit)
        current = found if isinstance(found, pygit2.Commit) else None
        for _ in range(MAX_WALK):
            if current is None:
                return
            yield current
            current = current.parents[0] if current.parents else None

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
            current = inputs(commit.tree, release)
            if current != key:
                if key:
                    found.append(ReleaseRevision(oldest, _digest(key)))
                if not current or len(found) >= count:
                    key = None
                    break
                key = current
            oldest = str(commit.id)
        if key:
            found.append(ReleaseRevision(oldest, _digest(key)))
        self._cache[(head, release, count)] = found
        if len(self._cache) > CACHED:
            self._cache.popitem(last=False)
        return found

    def digest_at(self, commit: str, release: str) -> str | None:
        """The digest of the release's inputs at `commit` (a pinned revision)."""
        found = self.repo.get(commit)
        if not isinstance(found, pygit2.Commit):
            return None
        key = inputs(found.tree, release)
        return _digest(key) if key else None

    def pins(self, head: str, release: str, stage: str, count: int = 8) -> list[str]:
        """The revisions pinned for `stage`, newest first, as the first-parent history of
        promotions.yaml says (consecutive repeats once)."""
        found: list[str] = []
        path = f"releases/{release}/promotions.yaml"
        for commit in self._first_parents(head):
            blob = _blob(commit.tree, path)
            pin = _pin(blob.data, stage) if blob is not None else None
            if pin and (not found or found[-1] != pin):
                found.append(pin)
                if len(found) >= count:
                    break
        return found

    def restore(self, release: str, head: str, target: str) -> dict[str, bytes]:
        """The release file, and those of its recipe files that differ at `head`, as they are
        at `target`: what a revert of the release to `target` writes."""
        old, new = self.repo.get(target), self.repo.get(head)
        if not isinstance(old, pygit2.Commit) or not isinstance(new, pygit2.Commit):
            return {}
        now = dict(inputs(new.tree, release))
        found: dict[str, bytes] = {}
        for path, blob in inputs(old.tree, release):
            data = self.read(target, path)
            if data is not None and (path == release_file(release) or now.get(path) != blob):
                found[path] = data
        return found

    def read(self, commit: str, path: str) -> bytes | None:
        found = self.repo.get(commit)
        if not isinstance(found, pygit2.Commit):
            return None
        blob = _blob(found.tree, path)
        return blob.data if blob is not None else None


def _pin(data: bytes, stage: str) -> str | None:
    doc, problem = parse_yaml("promotions.yaml", data)
    if doc is None or problem is not None:
        return None
    revision = doc.get(["promotions", stage, "revision"])
    return revision if isinstance(revision, str) else None
