"""Every kind of edit the bot makes to a YAML file changes only the lines it means to change:
flow maps keep their style (`{ max_batch: 128 }` stays as written, a key added to one stays in
it), comments and every other byte stay. Each file of this repository goes through each edit
that applies to it, and the bytes are diffed.

The edits: the writer's own operations on any file (load and dump, a value set to what it
is, a scalar changed, a key added to a flow or block map, an item appended, a key removed);
`denv optimize promote` on release files (one candidate per lever); rollback's restore of a
release block; promotions.yaml pins and rejections; `denv deploy`'s new release file.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest
from ruamel.yaml.comments import CommentedMap, CommentedSeq

from reconciler.catalog.deployable import TEMPLATE, ReleaseDraft, release_text
from reconciler.optimize.promote import edit_release
from reconciler.optimize.space import Candidate
from reconciler.rollout.prs import NEW_PROMOTIONS, add_rejection, rollback_change, set_pin
from reconciler.spec.recipe import AggregatedTopology, Parallel
from reconciler.spec.yamlio import YamlDoc, parse_yaml, plain
from tests.conftest import ROOT
from tests.optimize import test_promote_levers as levers

REPO_YAML = sorted(
    str(path.relative_to(ROOT))
    for top in ("catalog", "recipes", "fleets", "releases", "policies")
    for path in (ROOT / top).rglob("*.yaml")
)
RELEASES = [path for path in REPO_YAML if path.endswith("/denv.yaml")]
AT = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
A, B = "a" * 40, "b" * 40
# promotions.yaml as the bot starts it, as a person might write it, and as the repository has
PROMOTIONS = {
    "new": NEW_PROMOTIONS,
    "flow": (
        "# pins\npromotions:\n  prod: { revision: " + A + ", at: 2026-11-30T10:00:00Z, by: ada }"
        "  # by hand\nrejected: [ ]\n"
    ),
    **{path: (ROOT / path).read_text() for path in REPO_YAML if path.endswith("promotions.yaml")},
}
Loc = tuple[str | int, ...]


def parsed(path: str, text: str) -> YamlDoc:
    doc, problem = parse_yaml(path, text.encode())
    assert doc is not None, problem
    return doc


# ------------------------------------------------------------------ what may change
def _lines(node: Any) -> set[int]:
    """0-based lines of every key and item under a node."""
    found: set[int] = set()
    if isinstance(node, CommentedMap):
        for key, value in node.items():
            found.add(node.lc.key(key)[0])
            found |= {node.lc.value(key)[0]} | _lines(value)
    elif isinstance(node, CommentedSeq):
        for index, value in enumerate(node):
            found |= {node.lc.item(index)[0]} | _lines(value)
    return found


def _flow(node: Any) -> bool:
    return bool(node.fa.flow_style()) and len(node) > 0


@dataclass
class Meant:
    """The original's lines an edit may rewrite, and whether it may insert lines."""

    lines: set[int] = field(default_factory=set)
    inserts: bool = False


def meant(before: Any, after: Any, own: set[int], out: Meant) -> None:
    """Walk the original and the edited data together; `own` is the node's own lines (its
    key's line included)."""
    both_maps = isinstance(before, CommentedMap) and isinstance(after, Mapping)
    both_seqs = isinstance(before, CommentedSeq) and isinstance(after, list)
    if not (both_maps or both_seqs):
        if plain(before) != plain(after) or type(before) is not type(after):
            out.lines |= own
        return
    if both_maps:
        pairs = [(k, before.lc.key(k)[0]) for k in before]
        gone = [(k, line) for k, line in pairs if k not in after]
        kept = [(k, line) for k, line in pairs if k in after]
        added = [k for k in after if k not in before]
    else:
        n = min(len(before), len(after))
        kept = [(i, before.lc.item(i)[0]) for i in range(n)]
        gone = [(i, before.lc.item(i)[0]) for i in range(n, len(before))]
        added = list(range(len(before), len(after)))
    for key, line in gone:
        out.lines |= {line} | _lines(before[key])
    if added and _flow(before):
        out.lines |= own  # the flow collection is rewritten where it stands
    elif added:
        out.lines |= own if not before else set()
        out.inserts = True
    for key, line in kept:
        value = before[key]
        value_line = before.lc.value(key)[0] if both_maps else line
        meant(value, after[key], {line, value_line} | _lines(value), out)


def changed(original: str, text: str) -> tuple[set[int], bool]:
    """0-based lines of the original that were rewritten or removed; whether any came new."""
    old, new = original.splitlines(), text.splitlines()
    if len(old) == len(new):  # line for line (a diff could pair equal lines elsewhere)
        return {i for i, (a, b) in enumerate(zip(old, new, strict=True)) if a != b}, False
    rewritten: set[int] = set()
    inserted = False
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(
        None, old, new, autojunk=False
    ).get_opcodes():
        if tag in ("replace", "delete"):
            rewritten |= set(range(i1, i2))
        inserted |= tag == "insert" or (tag == "replace" and j2 - j1 > i2 - i1)
    return rewritten, inserted


COMMENT = re.compile(r"(?:^|\s)(#.*)$")


def assert_only_meant(path: str, original: str, text: str) -> None:
    """`text` (the edited file) differs from `original` only where the data differs; every
    comment that was not on a removed part stays; and it reads back as YAML."""
    before = parsed(path, original).data
    after = parsed(path, text).data
    out = Meant()
    meant(before, after, set(), out)
    rewritten, inserted = changed(original, text)
    show = "".join(difflib.unified_diff(original.splitlines(True), text.splitlines(True)))
    assert rewritten <= out.lines, f"{path}: lines it did not mean to change:\n{show}"
    assert out.inserts or not inserted, f"{path}: lines it did not mean to add:\n{show}"
    for number, line in enumerate(original.splitlines()):
        comment = COMMENT.search(line)
        if comment and number not in out.lines:
            assert comment.group(1) in text, f"{path}: comment lost: {line}\n{show}"


def nodes(node: Any, at: Loc = ()) -> Iterator[tuple[Loc, Any]]:
    """Every map and list of the file, outermost first."""
    if isinstance(node, CommentedMap | CommentedSeq):
        yield at, node
        items = node.items() if isinstance(node, CommentedMap) else enumerate(node)
        for key, value in items:
            yield from nodes(value, (*at, key))


# ------------------------------------------------------------------ the writer's operations
def _first(doc: YamlDoc, kind: type, flow: bool) -> Loc | None:
    return next(
        (
            at
            for at, node in nodes(doc.data)
            if at and isinstance(node, kind) and _flow(node) == flow and bool(node)
        ),
        None,
    )


def _add_key(flow: bool) -> Any:
    def edit(doc: YamlDoc) -> bool:
        at = _first(doc, CommentedMap, flow)
        if at is None:
            return False
        doc.set((*at, "x_denv"), {"a": 1} if not flow else 1)
        return True

    return edit


def _append(flow: bool) -> Any:
    def edit(doc: YamlDoc) -> bool:
        at = _first(doc, CommentedSeq, flow)
        if at is None:
            return False
        node = doc.get(at)
        doc.set(at, [*plain(node), plain(node[-1])])
        return True

    return edit


def _remove_key(doc: YamlDoc) -> bool:
    at = _first(doc, CommentedMap, True)
    if at is None or len(doc.get(at)) < 2:
        return False
    doc.delete((*at, list(doc.get(at))[-1]))
    return True


def _change_scalars(doc: YamlDoc) -> bool:
    """One scalar in each flow map and each block map: numbers +1, strings suffixed."""
    done = False
    for at, node in list(nodes(doc.data)):
        if isinstance(node, CommentedMap):
            for key, value in node.items():
                if isinstance(value, int | str) and not isinstance(value, bool):
                    new = value + 1 if isinstance(value, int) else f"{value}-x"
                    doc.set((*at, key), new)
                    done = True
                    break
    return done


def _self_maps(doc: YamlDoc) -> bool:
    """Every map and list set to itself, as plain data: nothing to change."""
    for at, node in list(nodes(doc.data)):
        if at:
            doc.set(at, plain(node))
    return True


OPERATIONS = {
    "set-every-map-and-list-to-itself": _self_maps,
    "change-a-scalar-of-every-map": _change_scalars,
    "add-a-key-to-a-flow-map": _add_key(True),
    "add-a-map-to-a-block-map": _add_key(False),
    "append-to-a-flow-list": _append(True),
    "append-to-a-block-list": _append(False),
    "remove-a-key-of-a-flow-map": _remove_key,
}


@pytest.mark.parametrize("path", REPO_YAML)
def test_load_and_dump_changes_no_byte(path: str) -> None:
    original = (ROOT / path).read_text()
    doc = parsed(path, original)
    doc.structural = True  # through ruamel's writer, not the scalar splice
    assert doc.dumps() == original


@pytest.mark.parametrize("operation", OPERATIONS)
@pytest.mark.parametrize("path", REPO_YAML)
def test_each_operation_changes_only_what_it_means(path: str, operation: str) -> None:
    original = (ROOT / path).read_text()
    doc = parsed(path, original)
    if not OPERATIONS[operation](doc):
        pytest.skip(f"{path} has nothing {operation} applies to")
    text = doc.dumps()
    assert plain(parsed(path, text).data) == plain(doc.data)
    assert_only_meant(path, original, text)
    if operation == "set-every-map-and-list-to-itself":
        assert text == original
    if operation == "add-a-key-to-a-flow-map":
        [line] = [line for line in text.splitlines() if "x_denv" in line]
        assert re.search(r"\{.*x_denv: 1 ?\}", line), line  # inside the flow map, on its line


def test_flow_maps_keep_their_spacing_as_the_file_writes_them() -> None:
    spaced = "a: { b: 1 }  # note\nc:\n  d: [1, 2]\n"
    doc = parsed("x.yaml", spaced)
    doc.set(("a", "e"), 2)
    doc.set(("c", "f"), {"g": 3})
    assert doc.dumps() == "a: { b: 1, e: 2 }  # note\nc:\n  d: [1, 2]\n  f:\n    g: 3\n"
    tight = "a: {b: 1}\n"
    doc = parsed("x.yaml", tight)
    doc.set(("a", "e"), 2)
    assert doc.dumps() == "a: {b: 1, e: 2}\n"


# ------------------------------------------------------------------ the bot's writers
@dataclass
class MemoryFiles:
    """`BotFiles` over texts in memory, as the forge's tree files are."""

    texts: dict[str, str]
    docs: dict[str, YamlDoc] = field(default_factory=dict)

    def exists(self, path: str) -> bool:
        return path in self.texts

    def yaml(self, path: str) -> YamlDoc:
        if path not in self.docs:
            self.docs[path] = parsed(path, self.texts[path])
        return self.docs[path]

    def write(self, path: str, text: str) -> None:
        self.docs.pop(path, None)
        self.texts[path] = text

    def text(self, path: str) -> str:
        return self.docs[path].dumps() if path in self.docs else self.texts[path]


def promotion_candidates() -> list[Candidate]:
    """One candidate per lever of the example release (its first feasible choice)."""
    base = levers.bases()[0]
    found = (next(levers.singles(base, lever.name), None) for lever in levers.space(base).levers)
    return [candidate for candidate in found if candidate is not None]


@pytest.mark.parametrize("path", RELEASES)
def test_optimize_promote_changes_only_the_levers_lines(path: str) -> None:
    original = (ROOT / path).read_text()
    body = parsed(path, original).data["release"]
    doc = parsed(path, original)
    same_topology = plain(body["topology"]) if "topology" in body else None
    edit_release(doc, body["recipe"], plain(body.get("overrides", {})), same_topology)
    assert doc.dumps() == original  # promoting what runs changes nothing
    if path != levers.PATH:
        return  # the candidates below are the example release's
    candidates = promotion_candidates()
    assert len(candidates) >= 10
    for candidate in candidates:
        text = levers.promote(levers.bases()[0], candidate)
        assert_only_meant(path, original, text)


def restored(path: str, current: str, target: str) -> str:
    """The release file once rollback restores the first stage to `target`'s release block."""
    files = MemoryFiles({path: current})
    release = path.split("/")[1]
    restore = {path: target.encode()}
    rollback_change(release, "canary", True, B, A, "ttft", restore, "t", "b", AT).edit(files)
    return files.text(path)


@pytest.mark.parametrize("path", RELEASES)
def test_rollback_restore_changes_only_the_restored_lines(path: str) -> None:
    original = (ROOT / path).read_text()
    assert restored(path, original, original) == original
    other_stages = re.sub(r"bake: \w+", "bake: 1h", original)
    assert restored(path, original, other_stages) == original  # only the release block moves
    older = re.sub(r"max_batch: \d+", "max_batch: 64", original)
    assert_only_meant(path, original, restored(path, original, older))


@pytest.mark.parametrize("name", PROMOTIONS)
def test_promotion_pins_and_rejections_change_only_their_lines(name: str) -> None:
    path = "releases/chat-8b/promotions.yaml"
    original = PROMOTIONS[name]
    edits: list[Callable[[MemoryFiles], None]] = [
        lambda f: set_pin(f, "chat-8b", "prod", B, AT),  # a stage pinned already, or new
        lambda f: set_pin(f, "chat-8b", "canary", A, AT),
        lambda f: add_rejection(f, "chat-8b", B, "ttft p99 2 s > 1.5 s", AT, "canary"),
        lambda f: add_rejection(f, "chat-8b", B, "again", AT, "canary"),  # listed: nothing
    ]
    text = original
    for edit in edits:
        files = MemoryFiles({path: text})
        edit(files)
        edited = files.text(path)
        assert_only_meant(path, text, edited)
        text = edited
    final = parsed(path, text).data
    assert final["promotions"]["prod"]["revision"] == B
    assert [r["revision"] for r in final["rejected"]] == [B]
    if name == "flow":
        assert "  # by hand" in text


def test_deploy_writes_the_template_with_only_its_values_changed() -> None:
    draft = ReleaseDraft(
        name="chat-70b",
        weights="hf://meta-llama/Llama-3.1-70B-Instruct@" + A,
        recipe="llama-3.1-70b/vllm@1",
        fleet="local",
        stage="canary",
        origin="recipe llama-3.1-70b/vllm@1",
        topology=AggregatedTopology(mode="aggregated", replicas=2, gpus=4, parallel=Parallel(tp=4)),
    )
    template = TEMPLATE.format(origin=draft.origin)
    assert_only_meant(draft.path, template, release_text(draft))
