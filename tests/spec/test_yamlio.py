"""Hostile YAML is refused quickly with a position; round-trip edits keep the file as written."""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest

from reconciler.spec.yamlio import MAX_YAML_BYTES, parse_yaml
from tests.conftest import ROOT

ALIAS_BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
    f"*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n"
    for i in range(9)
)

HOSTILE = [
    pytest.param(ALIAS_BOMB.encode(), 1, "anchors and aliases", id="alias-bomb"),
    pytest.param(b"a: " + b"x" * (MAX_YAML_BYTES + 1), 1, "at most", id="multi-megabyte"),
    pytest.param(b"a: " + b"[" * 5000 + b"]" * 5000, 1, "nested deeper", id="deep-flow"),
    pytest.param(
        "".join(f"{'  ' * i}k{i}:\n" for i in range(200)).encode() + b"  " * 200 + b"v: 1\n",
        33,
        "nested deeper",
        id="deep-block",
    ),
    pytest.param(b"recipe:\n\tid: x\n", 2, "tab character", id="tabs"),
    pytest.param(b"fleet:\n  name: a\n  name: b\n", 3, "duplicate key", id="duplicate-keys"),
    pytest.param(b"fleet:\n  name: caf\xe9\n", 2, "not UTF-8", id="non-utf8"),
    pytest.param(b"a: 1\n---\nb: 2\n", 2, "another document", id="two-documents"),
    pytest.param(b"a: [1, 2\n", 2, "invalid YAML", id="unclosed-flow"),
    pytest.param(b"", 1, "empty", id="empty"),
]


@pytest.mark.parametrize(("data", "line", "message"), HOSTILE)
def test_hostile_yaml_is_refused_at_once(data: bytes, line: int, message: str) -> None:
    doc, problem = parse_yaml("fleets/bad.yaml", data)  # an alias bomb ends: aliases refused
    assert doc is None
    assert problem is not None
    assert message in problem.message
    assert problem.line == line
    assert str(problem).startswith(f"fleets/bad.yaml:{line}:")


def test_largest_allowed_file_parses_in_bounded_time() -> None:
    line = "  - { name: host-0000, address: 10.0.0.1, gpus: 8 }\n"
    data = ("hosts:\n" + line * ((MAX_YAML_BYTES - 8) // len(line))).encode()
    doc, problem = parse_yaml("x.yaml", data)  # its time: benchmarks/yaml_parse.py
    assert problem is None and doc is not None
    assert len(doc.data["hosts"]) == (MAX_YAML_BYTES - 8) // len(line)


REPO_YAML = sorted(
    str(path.relative_to(ROOT))
    for top in ("catalog", "recipes", "fleets", "releases", "policies")
    for path in (ROOT / top).rglob("*.yaml")
)


@pytest.mark.parametrize("path", REPO_YAML)
def test_every_repo_file_round_trips_byte_identical(path: str) -> None:
    """Setting every scalar to the value it has changes nothing."""
    data = (ROOT / path).read_bytes()
    doc, problem = parse_yaml(path, data)
    assert problem is None and doc is not None
    for loc, value in _scalars(doc.data, ()):
        doc.set(loc, value)
    assert doc.dumps() == data.decode()
    assert not doc.structural


def _scalars(node: object, at: tuple[str | int, ...]) -> list[tuple[tuple[str | int, ...], object]]:
    if isinstance(node, dict):
        return [s for k, v in node.items() for s in _scalars(v, (*at, k))]
    if isinstance(node, list):
        return [s for i, v in enumerate(node) for s in _scalars(v, (*at, i))]
    return [(at, node)]


def test_adding_a_field_keeps_comments_and_order() -> None:
    path = "releases/chat-8b/denv.yaml"
    original = (ROOT / path).read_text()
    doc, _ = parse_yaml(path, original.encode())
    assert doc is not None
    doc.set(("stages", 0, "promotion"), "auto")
    changed = doc.dumps()
    assert doc.structural
    assert [line for line in changed.splitlines() if line.lstrip().startswith("#")] == [
        line for line in original.splitlines() if line.lstrip().startswith("#")
    ]
    assert "    promotion: auto" in changed.splitlines()
    reread, _ = parse_yaml(path, changed.encode())
    assert reread is not None and list(reread.data) == list(doc.data)


def test_one_field_change_is_a_one_line_diff() -> None:
    path = "releases/chat-8b/denv.yaml"
    original = (ROOT / path).read_text()
    doc, _ = parse_yaml(path, original.encode())
    assert doc is not None
    doc.set(("release", "overrides", "settings", "max_batch"), 256)
    doc.set(("stages", 1, "bake"), "45m")
    changed = doc.dumps()
    diff = [
        line
        for line in difflib.unified_diff(original.splitlines(), changed.splitlines(), n=0)
        if line.startswith(("+", "-")) and not line.startswith(("+++", "---"))
    ]
    assert diff == [
        "-    settings: { max_batch: 128 }",
        "+    settings: { max_batch: 256 }",
        "-    bake: 30m",
        "+    bake: 45m",
    ]
    assert changed.count("#") == original.count("#")  # every comment kept


def test_positions_point_at_the_field(tmp_path: Path) -> None:
    doc, _ = parse_yaml("f.yaml", b"fleet:\n  name: a\n  hosts:\n    - { name: h, gpus: 8 }\n")
    assert doc is not None
    assert doc.position(("fleet", "hosts", 0, "gpus")) == (4, 24)
    assert doc.position(("fleet", "aggregated", "name")) == (2, 9)  # union tags skipped


def test_a_value_that_needs_quotes_in_a_flow_mapping_gets_them() -> None:
    doc, _ = parse_yaml("f.yaml", b"fleet: { name: a, provider: b }  # keep\n")
    assert doc is not None
    doc.set(("fleet", "provider"), "x, y: z")
    assert doc.dumps() == 'fleet: { name: a, provider: "x, y: z" }  # keep\n'


@pytest.mark.parametrize("path", REPO_YAML)
def test_structural_edit_keeps_every_comment(path: str) -> None:
    """The ruamel path (adding a key) keeps comments and order, and reads back the same."""
    doc, _ = parse_yaml(path, (ROOT / path).read_bytes())
    assert doc is not None
    top = next(iter(doc.data))
    doc.set((top, "x-denv-test"), 1) if isinstance(doc.data[top], dict) else doc.set(("x",), 1)
    changed = doc.dumps()
    comments = [line.strip() for line in doc.text.splitlines() if line.strip().startswith("#")]
    assert [line.strip() for line in changed.splitlines() if line.strip().startswith("#")] == (
        comments
    )
    reread, problem = parse_yaml(path, changed.encode())
    assert problem is None and reread is not None
