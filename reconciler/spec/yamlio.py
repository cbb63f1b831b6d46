"""Adapter: YAML text <-> round-trip data with positions (ruamel.yaml).

Hostile input is refused before it can cost time or memory: files over MAX_YAML_BYTES,
nesting deeper than MAX_DEPTH, anchors and aliases (alias bombs), tabs, duplicate keys,
several documents, bytes that are not UTF-8. Each refusal is a `Problem` with line and column.
Writing back goes through the same round-trip representation, so comments, key order and
formatting survive an edit: the bot edits denv.yaml in pull requests that humans read.
"""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.tokens import (
    AliasToken,
    AnchorToken,
    BlockEndToken,
    BlockMappingStartToken,
    BlockSequenceStartToken,
    FlowMappingEndToken,
    FlowMappingStartToken,
    FlowSequenceEndToken,
    FlowSequenceStartToken,
    ScalarToken,
)

from reconciler.errors import Problem

# ruamel's round-trip parser reads about 200 KB/s; 64 KiB keeps the worst case well under a
# second, and the largest file denv ships is a fraction of it.
MAX_YAML_BYTES = 64 * 1024
MAX_DEPTH = 32

_OPENERS = (
    BlockMappingStartToken,
    BlockSequenceStartToken,
    FlowMappingStartToken,
    FlowSequenceStartToken,
)
_CLOSERS = (BlockEndToken, FlowMappingEndToken, FlowSequenceEndToken)

Loc = Sequence[str | int]


def _yaml() -> YAML:
    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    yaml.width = 4096
    yaml.indent(mapping=2, sequence=4, offset=2)
    yaml.allow_duplicate_keys = False
    return yaml


def decode_utf8(path: str, data: bytes) -> tuple[str | None, Problem | None]:
    """Text of a file, or a problem at the first byte that is not UTF-8."""
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError as exc:
        before = data[: exc.start]
        line = before.count(b"\n") + 1
        col = exc.start - (before.rfind(b"\n") + 1) + 1
        return None, Problem(path, line, col, f"byte 0x{data[exc.start]:02x} is not UTF-8 text")


@dataclass
class YamlDoc:
    """One parsed YAML file: its round-trip data and the text it came from."""

    path: str
    text: str
    data: Any
    edits: list[tuple[int, int, Any]] = field(default_factory=list)  # 0-based line, col
    structural: bool = False

    def position(self, loc: Loc) -> tuple[int, int]:
        """1-based line and column of the deepest node of `loc` that exists in the file."""
        line, col = 1, 1
        node = self.data
        for key in loc:
            if isinstance(node, CommentedMap) and key in node:
                line, col = node.lc.value(key) if _is_leaf(node[key]) else node.lc.key(key)
                node = node[key]
            elif isinstance(node, CommentedSeq) and isinstance(key, int) and 0 <= key < len(node):
                line, col = node.lc.item(key)
                node = node[key]
            else:
                continue  # pydantic adds union tags and the like that are not in the file
            line, col = line + 1, col + 1
        return line, col

    def key_position(self, loc: Loc) -> tuple[int, int]:
        """Position of the key itself (for 'unknown field' messages)."""
        *parent, last = loc
        node = self.get(parent)
        if isinstance(node, CommentedMap) and last in node:
            line, col = node.lc.key(last)
            return line + 1, col + 1
        return self.position(loc)

    def get(self, loc: Loc) -> Any:
        node = self.data
        for key in loc:
            try:
                node = node[key]
            except (KeyError, IndexError, TypeError):
                return None
        return node

    def set(self, loc: Loc, value: Any) -> None:
        """Change one value; `dumps` then rewrites only the text that changed."""
        *parent, last = loc
        container = self.get(parent)
        if not isinstance(container, CommentedMap | CommentedSeq):
            raise KeyError(f"{self.path}: no {'.'.join(map(str, parent))} to set {last} in")
        exists = (
            last in container
            if isinstance(container, CommentedMap)
            else (isinstance(last, int) and 0 <= last < len(container))
        )
        if exists and _is_leaf(container[last]) and _is_leaf(value):
            if isinstance(container[last], type(value)) and container[last] == value:
                return  # unchanged: the text stays exactly as written
            line, col = (
                container.lc.value(last)
                if isinstance(container, CommentedMap)
                else container.lc.item(last)
            )
            self.edits.append((line, col, value))
        else:
            self.structural = True
        container[last] = value

    def dumps(self) -> str:
        """The file's text with the edits applied. Scalar edits are spliced into the original
        text (a one-field change is a one-line diff, whatever the file's style); other edits
        go through ruamel's round-trip dump, which keeps comments and key order."""
        if not self.structural:
            spliced = _splice(self.text, self.edits, self.data)
            if spliced is not None:
                return spliced
        stream = io.StringIO()
        _yaml().dump(self.data, stream)
        return stream.getvalue()


def _scalar_texts(value: Any) -> list[str]:
    """Ways to write a scalar, plainest first."""
    if value is None:
        return ["null"]
    if isinstance(value, bool):
        return ["true" if value else "false"]
    if isinstance(value, int | float):
        return [repr(value)]
    # a JSON string is a valid double-quoted YAML scalar
    return [str(value), json.dumps(str(value), ensure_ascii=False)]


def _splice(text: str, edits: list[tuple[int, int, Any]], expected: Any) -> str | None:
    """Replace each edited scalar's source span; None if the result would not read back."""
    spans = {
        (t.start_mark.line, t.start_mark.column): (t.start_mark.index, t.end_mark.index)
        for t in _yaml().scan(text)
        if isinstance(t, ScalarToken)
    }
    latest = {(line, col): value for line, col, value in edits}
    if not all(where in spans for where in latest):
        return None
    order = sorted(latest, key=lambda where: spans[where], reverse=True)
    for force_quotes in (False, True):  # plain where it reads back, else quoted
        attempt = text
        for where in order:
            start, end = spans[where]
            forms = _scalar_texts(latest[where])
            quoted = force_quotes or text[start] in "'\""
            attempt = attempt[:start] + (forms[-1] if quoted else forms[0]) + attempt[end:]
        if _reads_back(attempt, expected):
            return attempt
    return None


def _reads_back(text: str, expected: Any) -> bool:
    try:
        return bool(plain(_yaml().load(text)) == plain(expected))
    except YAMLError:
        return False


def _is_leaf(value: Any) -> bool:
    return not isinstance(value, CommentedMap | CommentedSeq)


def _prescan(path: str, text: str) -> Problem | None:
    """Refuse what would be slow or explosive to compose, from the token stream alone."""
    depth = 0
    for token in _yaml().scan(text):
        mark = token.start_mark
        if isinstance(token, AliasToken | AnchorToken):
            return Problem(
                path,
                mark.line + 1,
                mark.column + 1,
                "anchors and aliases (&, *) are not allowed in denv files",
            )
        if isinstance(token, _OPENERS):
            depth += 1
            if depth > MAX_DEPTH:
                return Problem(
                    path, mark.line + 1, mark.column + 1, f"nested deeper than {MAX_DEPTH} levels"
                )
        elif isinstance(token, _CLOSERS):
            depth -= 1
    return None


def _mark_problem(path: str, exc: MarkedYAMLError) -> Problem:
    mark = exc.problem_mark or exc.context_mark
    line, col = (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)
    message = str(exc.problem or exc.context or "not valid YAML").strip()
    if "duplicate key" in message:
        message = message.split(" with value")[0]
    elif "'\\t'" in message:
        message = "tab character: YAML indents with spaces only"
    return Problem(path, line, col, f"invalid YAML: {message}")


def parse_yaml(path: str, data: bytes) -> tuple[YamlDoc | None, Problem | None]:
    """Parse one YAML file, refusing hostile input with one clear problem."""
    if len(data) > MAX_YAML_BYTES:
        return None, Problem(
            path,
            1,
            1,
            f"file is {len(data):,} bytes; denv YAML files are at most {MAX_YAML_BYTES:,} bytes",
        )
    text, problem = decode_utf8(path, data)
    if text is None:
        return None, problem
    try:
        problem = _prescan(path, text)
        if problem is not None:
            return None, problem
        loaded = _yaml().load(text)
    except MarkedYAMLError as exc:
        return None, _mark_problem(path, exc)
    except (YAMLError, RecursionError, ValueError) as exc:
        return None, Problem(path, 1, 1, f"invalid YAML: {exc}")
    if loaded is None:
        return None, Problem(path, 1, 1, "file is empty")
    return YamlDoc(path=path, text=text, data=loaded), None


def plain(value: Any) -> Any:
    """Round-trip data as plain dicts, lists and scalars, for validation."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, str):
        return str(value)  # drops ruamel's quoted-string subclasses
    return value
