"""Pure logic: what every PR comment is rendered with — a template filled in with its footer,
and the partials (tables, figures, quoted text) the kinds share. Each kind renders its view
in its own module, `reconciler/forge/kinds/<name>.py`; forge/comments.py registers them.
(The templates are files the registry names, read once.)

Text that hosts, engines or a pull request's files wrote (the views' `Said` fields: an
engine's log lines, a host's error, a file's problems, a parity answer) is shown only quoted:
`quoted` puts it in a fenced block, `code` in a code span, each fenced with more backticks
than any run inside, so a mention, an image, a link, HTML or a hidden marker in it is shown
as written, never rendered or acted on.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from importlib.resources import files
from importlib.resources.abc import Traversable
from string import Template
from typing import Protocol

from reconciler.shown import shown

TEMPLATES = files("reconciler.forge.templates")  # denv's own kinds' templates, and the footer


class Fill(Protocol):
    """A kind's template, filled in with `values` (`$name` in it) and the footer."""

    def __call__(self, **values: str) -> str: ...


_READ: dict[str, Template] = {}  # each template read once, by where it is


def _template(path: Traversable) -> Template:
    if (read := _READ.get(str(path))) is None:
        read = _READ[str(path)] = Template(path.read_text())
    return read


def fill(template: Traversable, **values: str) -> str:
    """`template` filled in, with the footer; blank runs and line-end spaces dropped."""
    footer = _template(TEMPLATES / "footer.md").template.strip()
    text = _template(template).substitute(footer=footer, **values)
    text = re.sub(r"[ \t]+\n", "\n", text)
    return re.sub(r"\n{3,}", "\n\n", text).strip("\n") + "\n"


def _fence(text: str, least: int) -> str:
    """Backticks no run in `text` is as long as."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    return "`" * max(least, longest + 1)


def quoted(said: str, info: str = "") -> str:
    """Text someone else wrote, as a fenced code block: shown as written."""
    body = shown(said).strip("\n")
    fence = _fence(body, 3)
    return f"{fence}{info}\n{body}\n{fence}"


def unquoted(text: str) -> str:
    """What `quoted` quoted (a check's summary read back from GitHub); other text as is."""
    found = re.fullmatch(r"(`{3,})\n(.*)\n\1", text, re.DOTALL)
    return found[2] if found else text


def code(said: str) -> str:
    """Text someone else wrote, in a line, as a code span: shown as written (in a table
    cell, `table` escapes its '|' as GitHub asks)."""
    body = " ".join(shown(said).split()) or " "
    fence = _fence(body, 1)
    pad = " " if body[0] == "`" or body[-1] == "`" else ""
    return f"{fence}{pad}{body}{pad}{fence}"


def cell(text: str) -> str:
    """Text that stays inside one table cell."""
    return " ".join(text.replace("|", "\\|").split())


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[int] = ()) -> str:
    rule = ["---:" if i in right else "---" for i in range(len(headers))]
    lines = [headers, rule, *[[cell(c) for c in row] for row in rows]]
    return "\n".join("| " + " | ".join(line) + " |" for line in lines)


def number(value: float) -> str:
    """Three significant figures for small values, thousands separators for large ones."""
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.3g}"


def percent(fraction: float) -> str:
    return f"{fraction * 100:+.1f}%".replace("-", "−")


def short(sha: str) -> str:
    return sha[:12]


def text(plain: str) -> str:
    """Plain text inside markdown: characters that would start markup are escaped."""
    for char in "\\`*_[]<>|":
        plain = plain.replace(char, "\\" + char)
    return plain
