"""Suite files: the default suite, and errors that name the file, line and field."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from reconciler.errors import NotFound, SpecError
from reconciler.parity.suite import parse_suite
from reconciler.parity.suite_files import load_suite
from tests.conftest import ROOT

GOOD = (
    '{"id": "a", "kind": "chat", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}'
)


def test_the_default_suite_is_what_its_script_writes() -> None:
    script = ROOT / "scripts/make_parity_suite.py"
    written = subprocess.run(
        [sys.executable, str(script), "--stdout"], capture_output=True, check=True, timeout=60
    ).stdout
    assert written == (ROOT / "policies/parity/default.jsonl").read_bytes()


def test_the_default_suite_has_512_different_prompts_of_every_kind() -> None:
    suite = load_suite(ROOT, "default")
    assert len(suite.prompts) == 512
    texts = {
        json.dumps([p.prompt, p.messages and [m.content for m in p.messages]])
        for p in suite.prompts
    }
    assert len(texts) == 512
    kinds = {p.kind for p in suite.prompts}
    assert kinds == {"chat", "completion"}
    domains = {p.id.split("-")[0] for p in suite.prompts}
    assert domains == {"code", "maths", "instructions", "summaries", "chat", "languages", "prefix"}
    lengths = sorted(
        len((p.prompt or "") + "".join(m.content for m in p.messages or ())) for p in suite.prompts
    )
    assert lengths[0] < 40 and lengths[-1] > 12_000  # a few words to a few thousand tokens


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        (["{not json"], ["s.jsonl:1:2: not JSON"]),
        (["[1, 2]"], ["s.jsonl:1:1: a prompt line is a JSON object"]),
        (
            [GOOD, '{"id": "b", "kind": "chat", "max_tokens": 4}'],
            ["s.jsonl:2:1: (file): a chat prompt has messages and no prompt"],
        ),
        (
            ['{"id": "b", "kind": "completion", "prompt": "x", "max_tokens": 0}'],
            ["s.jsonl:1:50: max_tokens: Input should be greater than or equal to 1"],
        ),
        (
            [
                '{"id": "b", "kind": "completion", "prompt": "x", "max_tokens": 3, '
                '"top_logprobs": 21}'
            ],
            ["s.jsonl:1:67: top_logprobs: Input should be less than or equal to 20"],
        ),
        (
            ['{"id": "b", "kind": "completion", "prompt": "x", "max_tokens": 3, "temperature": 1}'],
            ["s.jsonl:1:67: temperature: unknown field"],
        ),
        (
            [
                '{"id": "b", "kind": "chat", "messages": [{"role": "bot", "content": "x"}], '
                '"max_tokens": 3}'
            ],
            ["s.jsonl:1:29: messages[0].role: Input should be 'system', 'user' or 'assistant'"],
        ),
        ([GOOD, "", GOOD], ["s.jsonl:3:2: id: 'a' is on line 1"]),
        ([""], ["s.jsonl:1:1: the suite has no prompts"]),
    ],
    ids=[
        "json",
        "not-object",
        "chat-without-messages",
        "max-tokens",
        "top-logprobs",
        "unknown",
        "role",
        "duplicate-id",
        "empty",
    ],
)
def test_bad_lines_are_named_by_line_and_field(lines: list[str], expected: list[str]) -> None:
    with pytest.raises(SpecError) as caught:
        parse_suite("s", "s.jsonl", "\n".join(lines).encode())
    found = [str(p) for p in caught.value.problems]
    assert len(found) == len(expected)
    for text, prefix in zip(found, expected, strict=True):
        assert text.startswith(prefix), text


def test_a_suite_by_path_and_a_missing_one(tmp_path: Path) -> None:
    path = tmp_path / "mine.jsonl"
    path.write_text(GOOD + "\n")
    suite = load_suite(ROOT, str(path))
    assert (suite.name, [p.id for p in suite.prompts]) == ("mine", ["a"])
    with pytest.raises(NotFound, match=r"no parity suite 'nope'.*suites: default"):
        load_suite(ROOT, "nope")
