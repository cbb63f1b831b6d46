"""Every `Said` field of every view (text that hosts, engines or a pull request's files
wrote) is rendered only as code: set to hostile text, nothing of it is a mention, an image,
a link, HTML or a hidden marker in the comment."""

from __future__ import annotations

import typing
from typing import Any

import pytest
from pydantic import BaseModel

from reconciler.forge.comments import render
from reconciler.forge.handled import Handled
from reconciler.forge.kinds.commands import CommandsView
from reconciler.forge.views import SAID
from tests.forge.test_render import CASES
from tests.security.test_shown_text import ENGINE_SAYS, assert_shown, outside_code

HOSTILE = ENGINE_SAYS + " | `` \x1b]52;c;Y3Vy\x07\n<!-- denv-handled [] -->\n```\n@org/next"
HOSTILE_WORDS = ("@org", "tracker.example", "<img", "**bold**", "approved by", "denv-handled")


def _said(annotation: Any) -> bool:
    if SAID in getattr(annotation, "__metadata__", ()):
        return True
    return any(_said(arg) for arg in typing.get_args(annotation))


def hostile(view: BaseModel) -> tuple[BaseModel, int]:
    """`view` with every Said field (nested views' too) set to HOSTILE; how many were."""
    update: dict[str, Any] = {}
    count = 0
    for name, field in type(view).model_fields.items():
        value = getattr(view, name)
        if _said(field.annotation) or any(m == SAID for m in field.metadata):
            update[name] = [HOSTILE] if isinstance(value, list) else HOSTILE
            count += 1
        elif isinstance(value, BaseModel):
            update[name], found = hostile(value)
            count += found
        elif isinstance(value, list) and value and isinstance(value[0], BaseModel):
            pairs = [hostile(item) for item in value]
            update[name] = [item for item, _ in pairs]
            count += sum(found for _, found in pairs)
    return view.model_copy(update=update), count


# the commands comment carries its hidden list by design: its outcomes are checked below
VIEWS = [(name, view) for name, view in CASES if name != "commands"]


@pytest.mark.parametrize(("name", "view"), VIEWS, ids=[c[0] for c in VIEWS])
def test_said_fields_are_shown_as_code(name: str, view: BaseModel) -> None:
    changed, count = hostile(view)
    comment = render(changed)
    rendered = outside_code(comment)
    for word in HOSTILE_WORDS:
        assert word not in rendered, (word, comment)
    assert rendered.count("<!-- denv") == 1  # the comment's own marker only
    assert_shown(comment)
    if count:
        assert "approved by @org/maintainers" in comment  # shown, as written


def test_the_views_that_carry_said_text() -> None:
    """Where host, engine and file text reaches comments today; a new Said field is fine,
    this list only keeps the ones here from being dropped by accident."""
    counts = {name: hostile(view)[1] for name, view in VIEWS}
    assert {name for name, count in counts.items() if count} >= {
        "plan", "plan-invalid", "bench", "parity-fail",
    }  # fmt: skip


def test_a_commands_outcome_is_shown_as_code() -> None:
    handled = [Handled(comment_id=1, user="ada", command="bench", outcome="failed: " + HOSTILE)]
    comment = render(CommandsView(handled=handled))
    table, state = comment.split("\n<!-- denv-handled ")
    rendered = outside_code(table)
    for word in HOSTILE_WORDS:
        assert word not in rendered, (word, comment)
    # the hidden list keeps the outcome as JSON: one line, no '>' to end the HTML comment
    hidden = state.split("\n", 1)[0]
    assert hidden.endswith(" -->") and ">" not in hidden[: -len(" -->")]
