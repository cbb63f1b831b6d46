"""Pure logic: hidden comment markers, splitting long bodies, and the upsert as a list of edits.

A denv comment starts with a hidden marker line, `<!-- denv:KIND -->`, so the next run finds
and edits it instead of adding another. A body over the forge's limit (GitHub: 65,536
characters) is split at line ends into numbered parts, each with its own marker
(`<!-- denv:KIND part=2 -->`); a code fence open at a cut is closed there and reopened in the
next part, so tables and diagrams still render.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from reconciler.forge.models import Comment

GITHUB_COMMENT_LIMIT = 65_536
KIND = re.compile(r"^[a-z0-9][a-z0-9-]*$")
_MARKER = re.compile(r"\A<!-- denv:(?P<kind>[a-z0-9][a-z0-9-]*)(?: part=(?P<part>[0-9]+))? -->")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
# room for the marker, the part header and a closing fence around each chunk
_RESERVE = 200


def marker(kind: str, part: int = 1) -> str:
    if not KIND.match(kind):
        raise ValueError(f"comment kind '{kind}' must be lowercase letters, digits and '-'")
    return f"<!-- denv:{kind} -->" if part == 1 else f"<!-- denv:{kind} part={part} -->"


def read_marker(body: str) -> tuple[str, int] | None:
    """(kind, part) of a denv comment, or None for any other comment."""
    found = _MARKER.match(body)
    if found is None:
        return None
    return found["kind"], int(found["part"] or 1)


def strip_marker(body: str, kind: str) -> str:
    """The body without its own first-line marker, if it has one."""
    first = marker(kind)
    if body.startswith(first):
        return body[len(first) :].removeprefix("\n")
    return body


def _cut_lines(text: str, size: int) -> list[str]:
    """Lines with their ends, none longer than `size`."""
    lines: list[str] = []
    for line in text.splitlines(keepends=True):
        while len(line) > size:
            lines.append(line[:size])
            line = line[size:]
        lines.append(line)
    return lines


def _fence_after(fence: str | None, line: str) -> str | None:
    """The fence open after `line` (its backticks or tildes), given the one open before."""
    found = _FENCE.match(line)
    if found is None:
        return fence
    if fence is None:
        return found[1]  # reopened as long: a quoted block's fence outruns what it quotes
    closes = (
        found[1][0] == fence[0] and len(found[1]) >= len(fence) and not line[found.end() :].strip()
    )
    return None if closes else fence


def _chunks(text: str, size: int) -> list[str]:
    room = size - _RESERVE
    chunks: list[str] = []
    current: list[str] = []
    length = 0
    fence: str | None = None
    opening = ""
    for line in _cut_lines(text, room // 2):
        if current and length + len(line) > room:
            chunk = "".join(current)
            if fence is not None:
                chunk = chunk.rstrip("\n") + "\n" + fence + "\n"
            chunks.append(chunk)
            current = [opening] if fence is not None else []
            length = len(opening) if fence is not None else 0
        current.append(line)
        length += len(line)
        before, fence = fence, _fence_after(fence, line)
        if before is None and fence is not None:
            opening = line.rstrip("\n")[:60] + "\n"  # e.g. ```mermaid, reopened as written
    chunks.append("".join(current))
    return chunks


def split_body(kind: str, body: str, limit: int = GITHUB_COMMENT_LIMIT) -> list[str]:
    """The comment(s) to post: one when it fits, else numbered parts, each under `limit`."""
    text = strip_marker(body, kind)
    whole = f"{marker(kind)}\n{text}"
    if len(whole) <= limit:
        return [whole]
    chunks = _chunks(text, limit)
    total = len(chunks)
    parts = []
    for number, chunk in enumerate(chunks, start=1):
        head = marker(kind, number)
        if number > 1:
            head += f"\n*(continued: part {number} of {total})*\n"
        tail = "" if number == total else "\n\n*(continued in the next comment)*"
        parts.append(f"{head}\n{chunk.rstrip(chr(10))}{tail}\n")
    return parts


@dataclass(frozen=True)
class Create:
    body: str


@dataclass(frozen=True)
class Edit:
    comment_id: int
    body: str


@dataclass(frozen=True)
class Delete:
    comment_id: int


Op = Create | Edit | Delete


def upsert_ops(existing: Sequence[Comment], kind: str, parts: Sequence[str]) -> list[Op]:
    """Edits that make the PR's `kind` comments read `parts`: edit in place, add missing parts,
    delete parts a longer earlier body left behind (and duplicates, oldest kept)."""
    found: dict[int, Comment] = {}
    ops: list[Op] = []
    for comment in sorted(existing, key=lambda c: (c.at, c.id)):
        read = read_marker(comment.body)
        if read is None or read[0] != kind:
            continue
        if read[1] in found or read[1] > len(parts):
            ops.append(Delete(comment.id))
        else:
            found[read[1]] = comment
    for number, body in enumerate(parts, start=1):
        if number not in found:
            ops.append(Create(body))
        elif found[number].body != body:
            ops.append(Edit(found[number].id, body))
    # creates and edits first: a reader never sees the comment vanish before it comes back
    return sorted(ops, key=lambda op: isinstance(op, Delete))
