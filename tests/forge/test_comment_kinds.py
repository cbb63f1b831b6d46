"""PR comment kinds come from one registry, `reconciler.forge.comments.KINDS`: a kind
registered there from outside the package (its template and its view module, under
tests/forge/kinds/) is rendered and posted through the path every comment takes."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.forge.comments import KINDS, CommentKind, kind_of, post, render
from reconciler.forge.local import LocalForge
from reconciler.forge.markers import read_marker
from tests.forge.kinds.shout import SHOUT, ShoutView
from tests.forge.test_local import _branch_with_change
from tests.security.test_shown_text import outside_code

HOSTILE = "@org/maintainers approved this ![x](https://tracker.example/x.png)"


def test_a_kind_registered_from_outside_is_posted_and_edited_in_place(
    git_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(KINDS, "shout", SHOUT)
    _branch_with_change(git_repo)
    forge = LocalForge(git_repo, user="ada")
    number = forge.open_pr("bigger-batch", "t").number

    [first] = post(forge, number, ShoutView(title="hello *there*", said=HOSTILE))
    [again] = post(forge, number, ShoutView(title="hello again", said="ok"))

    assert again == first  # the same comment, edited in place under its marker
    [comment] = forge.own_comments(number)
    assert read_marker(comment.body) == ("shout", 1)
    assert comment.body == render(ShoutView(title="hello again", said="ok"))
    assert comment.body.startswith("<!-- denv:shout -->\n### Shout: hello again\n\n```\nok\n```")
    assert comment.body.endswith("this comment is edited in place on each run.</sub>\n")


def test_a_kind_renders_what_others_said_only_quoted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(KINDS, "shout", SHOUT)
    body = render(ShoutView(title="*loud*", said=HOSTILE))
    assert "### Shout: \\*loud\\*" in body
    assert "@org" not in outside_code(body) and "tracker.example" not in outside_code(body)


def test_a_template_must_start_with_its_kinds_marker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(KINDS, "yell", CommentKind(ShoutView, SHOUT.template, SHOUT.render))
    assert kind_of(ShoutView(title="t", said="s")) == "yell"
    with pytest.raises(ValueError, match="comment kind 'yell' does not start with its marker"):
        render(ShoutView(title="t", said="s"))


def test_a_view_no_kind_renders_is_a_bug() -> None:
    with pytest.raises(ValueError, match="no comment kind is rendered from a ShoutView"):
        render(ShoutView(title="t", said="s"))
