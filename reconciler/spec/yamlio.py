"""Adapter: YAML text <-> round-trip data with positions (ruamel.yaml).

Hostile input is refused before it can cost time or memory: files over MAX_YAML_BYTES,
nesting deeper than MAX_DEPTH, anchors and aliases (alias bombs), integers too long for Python
to print (`bounds.integer_refusal`), tabs, duplicate keys, several documents, bytes that are
not UTF-8. Each refusal is a `Problem` with line and column.
Writing back goes through the same round-trip representation, so comments, key order and
formatting survive an edit: the bot edits denv.yaml in pull requests that humans read.
"""

from __future__ import annotations

import datetime as dt
import difflib
import io
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.nodes import ScalarNode
from ruamel.yaml.scalarbool import ScalarBoolean
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
from reconciler.spec.bounds import MAX_YAML_BYTES, integer_refusal, too_large

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
    # denv refuses anchors and aliases when it reads, so it never writes them (ruamel would,
    # for a date or a node that an edit placed twice)
    yaml.representer.ignore_aliases = lambda _data: True
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
    """One parsed YAML file: its round-trip data and the text it came from. A file whose
    values came from the parse cache (parsecache.py) is parsed again, for positions and
    edits, only when `data` is first asked for: most commands never ask."""

    path: str
    text: str
    round_trip: Any = None  # the round-trip data; None until parsed
    edits: list[tuple[int, int, Any]] = field(default_factory=list)  # 0-based line, col
    structural: bool = False

    @property
    def data(self) -> Any:
        if self.round_trip is None:  # text that parsed before: it parses again the same
            self.round_trip = _yaml().load(self.text)
        return self.round_trip

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
        """Make the value at `loc` equal `value`, changing as little of the file as it can: a
        scalar is spliced into the text (`dumps`); a map or list given where the file has one
        is updated item by item, so the file's style, comments and key order stay; anything
        new becomes a round-trip node of its own (plain dicts and lists are converted)."""
        *parent, last = loc
        container = self.get(parent)
        if not isinstance(container, CommentedMap | CommentedSeq):
            raise KeyError(f"{self.path}: no {'.'.join(map(str, parent))} to set {last} in")
        exists = _holds(container, last)
        current = container[last] if exists else None
        if exists and current is value:
            return
        if isinstance(current, CommentedMap) and isinstance(value, Mapping):
            for key, item in list(value.items()):
                self.set([*loc, key], item)
            for key in [key for key in current if key not in value]:
                self.delete([*loc, key])
            return
        if isinstance(current, CommentedSeq) and isinstance(value, list | tuple):
            for index, item in enumerate(value):
                if index < len(current):
                    self.set([*loc, index], item)
                else:
                    current.append(_node(item))
                    self.structural = True
            while len(current) > len(value):
                self.delete([*loc, len(current) - 1])
            return
        if exists and _is_leaf(current) and _is_leaf(value):
            if isinstance(current, type(value)) and current == value:
                return  # unchanged: the text stays exactly as written
            if not self.structural:
                self._record(container, last, value)
        else:
            self.structural = True
        container[last] = _node(value)

    def delete(self, loc: Loc) -> None:
        """Remove a key or an item; nothing if it is not there."""
        *parent, last = loc
        container = self.get(parent)
        if isinstance(container, CommentedMap | CommentedSeq) and _holds(container, last):
            del container[last]
            self.structural = True

    def _record(self, container: CommentedMap | CommentedSeq, last: str | int, value: Any) -> None:
        """Note where a changed scalar stands in the text, for `dumps` to splice it."""
        try:
            line, col = (
                container.lc.value(last)
                if isinstance(container, CommentedMap)
                else container.lc.item(last)
            )
        except (KeyError, IndexError, TypeError):  # a node the file did not have
            self.structural = True
            return
        self.edits.append((line, col, value))

    def dumps(self) -> str:
        """The file's text with the edits applied. Scalar edits are spliced into the original
        text (a one-field change is a one-line diff, whatever the file's style); other edits
        go through ruamel's round-trip dump, which keeps comments and key order, and every
        line the edit left alone keeps its original bytes (`_keep_layout`)."""
        if not self.structural:
            spliced = _splice(self.text, self.edits, self.data)
            if spliced is not None:
                return spliced
        return _keep_layout(self.text, self.data)


def _holds(container: CommentedMap | CommentedSeq, last: str | int) -> bool:
    if isinstance(container, CommentedMap):
        return last in container
    return isinstance(last, int) and 0 <= last < len(container)


def _node(value: Any) -> Any:
    """A value as round-trip data: ruamel writes its own nodes, and edits reach into them."""
    if isinstance(value, CommentedMap | CommentedSeq):
        return value
    if isinstance(value, Mapping):
        node = CommentedMap()
        for key, item in value.items():
            node[key] = _node(item)
        return node
    if isinstance(value, list | tuple):
        return CommentedSeq(_node(item) for item in value)
    return value


def _emit(data: Any, padded: bool) -> str:
    stream = io.StringIO()
    _yaml().dump(data, stream)
    text = stream.getvalue()
    return _pad_flow_maps(text) if padded else text


def _flow_maps(text: str) -> list[tuple[int, int]]:
    """(index of '{', index of its '}') of every flow map of the text."""
    found, opened = [], []
    for token in _yaml().scan(text):
        if isinstance(token, FlowMappingStartToken):
            opened.append(token.start_mark.index)
        elif isinstance(token, FlowMappingEndToken) and opened:
            found.append((opened.pop(), token.start_mark.index))
    return found


def _pads_flow_maps(text: str) -> bool:
    """Whether the file writes its flow maps `{ a: 1 }` (ruamel writes `{a: 1}`)."""
    padded = plain = 0
    for start, end in _flow_maps(text):
        if end > start + 1 and text[start + 1] != "\n":
            padded += text[start + 1] == " "
            plain += text[start + 1] != " "
    return padded > plain


def _pad_flow_maps(text: str) -> str:
    """`{a: 1}` as `{ a: 1 }`; empty and multi-line maps as they are."""
    inserts = []
    for start, end in _flow_maps(text):
        if text[start + 1 : end].strip() and "\n" not in text[start:end]:
            inserts += [start + 1, end] if text[start + 1] != " " else []
    for at in sorted(inserts, reverse=True):
        text = text[:at] + " " + text[at:]
    return text


_COMMENT = re.compile(r"(\s+)(#[^\n]*)(\n?)$")


def _keep_comment(old: str, new: str) -> str:
    """A rewritten line's end-of-line comment where the file had it: at its column, else as
    far from the code as it was (ruamel places it before flow maps get their spaces)."""
    was, now = _COMMENT.search(old), _COMMENT.search(new)
    if was is None or now is None or was.group(2) != now.group(2):
        return new
    code = new[: now.start()]
    column = was.start(2)
    gap = " " * (column - len(code)) if len(code) < column else was.group(1)
    return code + gap + now.group(2) + now.group(3)


def _keep_layout(original: str, data: Any) -> str:
    """ruamel's dump of the edited data, with its flow maps spaced as the file spaces them,
    and the original bytes for every line the edit did not touch: ruamel writes the file
    line for line, so the lines it writes alike before and after the edit are the file's own.
    The plain dump where that would not read back as the data."""
    padded = _pads_flow_maps(original)
    edited = _emit(data, padded)
    before = _emit(_yaml().load(original), padded)
    old, dumped, new = (text.splitlines(keepends=True) for text in (original, before, edited))
    if len(old) != len(dumped):
        return edited
    merged: list[str] = []
    matcher = difflib.SequenceMatcher(None, dumped, new, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            merged += old[i1:i2]
        elif tag == "replace" and i2 - i1 == j2 - j1:
            merged += map(_keep_comment, old[i1:i2], new[j1:j2])
        else:
            merged += new[j1:j2]
    text = "".join(merged)
    return text if text == edited or _reads_back(text, data) else edited


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
    return not isinstance(value, Mapping | list | tuple)


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
        elif isinstance(token, ScalarToken) and (refusal := _integer_refusal(token)):
            return Problem(path, mark.line + 1, mark.column + 1, refusal)
    return None


# Fewer characters than any integer `bounds.integer_refusal` refuses (hexadecimal: 3,572 digits).
_SHORTEST_REFUSED = 3000


def _integer_refusal(token: ScalarToken) -> str | None:
    """Why a plain scalar that YAML reads as an integer is refused (`bounds.integer_refusal`);
    None for any other scalar. Only long scalars are asked: a short one is any integer's."""
    if not token.plain or len(token.value) <= _SHORTEST_REFUSED:
        return None
    tag = _yaml().resolver.resolve(ScalarNode, token.value, (True, False))
    return integer_refusal(token.value) if str(tag) == "tag:yaml.org,2002:int" else None


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
    refusal = too_large(len(data), MAX_YAML_BYTES)
    if refusal is not None:
        return None, Problem(path, 1, 1, refusal)
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
    return YamlDoc(path=path, text=text, round_trip=loaded), None


def parse_values(path: str, data: bytes) -> tuple[YamlDoc | None, Any, Problem | None]:
    """`parse_yaml`, and the file's values as plain data (`plain`) for validation."""
    doc, problem = parse_yaml(path, data)
    return doc, (None if doc is None else plain(doc.data)), problem


def plain(value: Any) -> Any:
    """Round-trip data as plain dicts, lists and scalars of Python's own types, for
    validation: ruamel's scalars (a string that remembers its quotes, a float its digits, an
    int its base, a timestamp its separator) become the values they stand for."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, str):
        return str(value)
    if isinstance(value, ScalarBoolean):
        return bool(value)
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, dt.datetime) and type(value) is not dt.datetime:
        return dt.datetime.combine(value.date(), value.timetz())
    return value
