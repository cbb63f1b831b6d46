"""A comment kind from outside the package: `<!-- denv:shout -->`, a title and what a host
said, from a `ShoutView`. tests/forge/test_comment_kinds.py registers it with its template
(shout.md, beside this file) by one entry in `KINDS`, as a new kind in reconciler/forge/
would be."""

from __future__ import annotations

from pathlib import Path

from reconciler.forge.comments import CommentKind
from reconciler.forge.models import Record
from reconciler.forge.render import Fill, quoted, text
from reconciler.forge.views import Said


class ShoutView(Record):
    title: str
    said: Said  # a host's words: shown only quoted


def render(view: ShoutView, fill: Fill) -> str:
    return fill(title=text(view.title), said=quoted(view.said))


SHOUT = CommentKind(ShoutView, Path(__file__).with_name("shout.md"), render)
