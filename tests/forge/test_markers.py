"""Markers, splitting and the upsert plan: pure, table-driven."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from reconciler.forge.markers import (
    GITHUB_COMMENT_LIMIT,
    Create,
    Delete,
    Edit,
    marker,
    read_marker,
    split_body,
    upsert_ops,
)
from reconciler.forge.models import Comment


@pytest.mark.parametrize(
    ("body", "read"),
    [
        ("<!-- denv:plan -->\nx", ("plan", 1)),
        ("<!-- denv:bench part=3 -->\nx", ("bench", 3)),
        ("> <!-- denv:plan -->\nquoted", None),
        ("plain comment", None),
    ],
    ids=["first", "part", "quoted", "plain"],
)
def test_read_marker(body: str, read: tuple[str, int] | None) -> None:
    assert read_marker(body) == read


def test_kind_is_checked() -> None:
    with pytest.raises(ValueError, match="lowercase"):
        marker("Plan -->")


def test_short_body_is_one_part_with_one_marker() -> None:
    assert split_body("plan", "<!-- denv:plan -->\nhello") == ["<!-- denv:plan -->\nhello"]
    assert split_body("plan", "hello") == ["<!-- denv:plan -->\nhello"]


@pytest.mark.parametrize("limit", [1000, 4096, GITHUB_COMMENT_LIMIT])
def test_parts_fit_and_keep_every_line_and_fence(limit: int) -> None:
    lines = [f"line {i} " + "x" * (i % 70) for i in range(3000)]
    body = "intro\n```diff\n" + "\n".join(lines) + "\n```\noutro\n" + "y" * (limit * 2) + "\n"
    parts = split_body("plan", body, limit)
    assert len(parts) > 1
    assert all(len(p) <= limit for p in parts)
    assert [read_marker(p) for p in parts] == [("plan", n) for n in range(1, len(parts) + 1)]
    joined = "".join(parts)
    assert all(line in joined for line in lines)
    for part in parts:
        fences = [line for line in part.splitlines() if line.startswith("```")]
        assert len(fences) % 2 == 0, part[:200]


def test_a_long_fence_is_closed_and_reopened_as_long() -> None:
    """A quoted block's fence outruns the backticks it quotes: a cut keeps it, so a quoted
    line of ten backticks stays inside the block in every part."""
    fence = "`" * 12
    lines = [("`" * 10) if i % 50 == 0 else f"line {i}" for i in range(2000)]
    body = f"{fence}\n" + "\n".join(lines) + f"\n{fence}\n"
    parts = split_body("bench", body, 4096)
    assert len(parts) > 1
    for part in parts:
        assert [line for line in part.splitlines() if line == fence] == [fence, fence]


def _comment(comment_id: int, body: str) -> Comment:
    return Comment(id=comment_id, author="denv-bot", body=body, at=datetime(2025, 1, 1, tzinfo=UTC))


def test_upsert_ops_edit_create_delete() -> None:
    existing = [
        _comment(1, "<!-- denv:plan -->\nold"),
        _comment(2, "<!-- denv:plan part=2 -->\nsame"),
        _comment(3, "<!-- denv:plan part=3 -->\nleft over"),
        _comment(4, "<!-- denv:bench -->\nother kind"),
        _comment(5, "<!-- denv:plan -->\na duplicate"),
    ]
    parts = ["<!-- denv:plan -->\nnew", "<!-- denv:plan part=2 -->\nsame"]
    assert upsert_ops(existing, "plan", parts) == [Edit(1, parts[0]), Delete(3), Delete(5)]
    assert upsert_ops([], "plan", parts) == [Create(parts[0]), Create(parts[1])]
