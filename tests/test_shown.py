"""reconciler/shown.py: what a terminal would act on is dropped, the text stays."""

from __future__ import annotations

import json

import pytest

from reconciler.shown import json_escaped, shown

CASES = [
    ("plain", "text as it is: é, 日本, [bold]", "text as it is: é, 日本, [bold]"),
    ("tab-newline", "a\tb\nc", "a\tb\nc"),
    ("osc52-bel", "a\x1b]52;c;Y3VybCBldmlsLmV4YW1wbGUgfCBzaA==\x07b", "ab"),
    ("osc52-st", "a\x1b]52;c;Y3Vy\x1b\\b", "ab"),
    ("osc8-link", "\x1b]8;;http://evil\x1b\\link\x1b]8;;\x1b\\", "link"),
    ("osc-left-open", "a\x1b]52;c;Y3Vy", "a"),
    ("osc-cut-by-csi", "a\x1b]0;t\x1b[31mb", "ab"),
    ("csi", "a\x1b[2J\x1b[1;1H\x1b[31mred\x1b[0m", "ared"),
    ("csi-private", "a\x1b[?1049hb", "ab"),
    ("csi-cut-short", "a\x1b[12", "a"),
    ("c1-csi", "a\x9b2Jb", "ab"),
    ("c1-osc", "a\x9d0;title\x9cb", "ab"),
    ("dcs", "a\x1bPq#0;2;0;0;0\x1b\\b", "ab"),
    ("apc-pm-sos", "a\x1b_x\x1b\\\x1b^y\x1b\\\x1bXz\x1b\\b", "ab"),
    ("reset", "a\x1bcb", "ab"),
    ("charset", "a\x1b(0b", "ab"),
    ("lone-esc", "a\x1b", "a"),
    ("c0", "a\x00\x07\x08\x0b\x0c\rb", "ab"),
    ("del-c1", "a\x7f\x80\x85\x8fb", "ab"),
    ("c1-apc-left-open", "a\x9fb", "a"),
    ("bidi", "a\u202eb\u2066c\u2069\u200fd", "abc\u200fd"),  # overrides, isolates; a mark stays
]


@pytest.mark.parametrize(("given", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_shown(given: str, expected: str) -> None:
    assert shown(given) == expected


def test_shown_twice_is_shown_once() -> None:
    for _, given, _ in CASES:
        assert shown(shown(given)) == shown(given)


def test_json_keeps_the_value_and_shows_no_raw_control() -> None:
    value = {"line": "a\x1b]52;c;x\x07\x9b2J\x85\x7f\u2028\u202eb"}
    document = json_escaped(json.dumps(value, ensure_ascii=False))
    assert json.loads(document) == value
    assert shown(document) == document
