"""Pure logic: which `/denv` comment commands have run. The bot keeps one comment (marker
`<!-- denv:commands -->`) listing every command it took up, with a hidden copy of that list
as JSON (forge/kinds/commands.py renders it), so each command runs once however often CI
runs `denv pr commands`; nothing but the pull request's own comments is kept."""

from __future__ import annotations

import re
from collections.abc import Sequence

from pydantic import TypeAdapter, ValidationError

from reconciler.forge.markers import read_marker
from reconciler.forge.models import Comment, CommentCommand, Record

KIND = "commands"
_STATE = re.compile(r"^<!-- denv-handled (?P<state>\[.*\]) -->$", re.MULTILINE)


class Handled(Record):
    comment_id: int
    user: str
    command: str  # e.g. "bench"
    outcome: str  # what came of it, in a line


_LIST = TypeAdapter(list[Handled])


def read_handled(comments: Sequence[Comment]) -> list[Handled]:
    """The commands the bot's commands comment lists (an unreadable list counts as none)."""
    found: dict[int, Handled] = {}
    for comment in comments:
        if (read_marker(comment.body) or ("",))[0] != KIND:
            continue
        state = _STATE.search(comment.body)
        if state is None:
            continue
        try:
            for item in _LIST.validate_json(state["state"]):
                found.setdefault(item.comment_id, item)
        except ValidationError:
            continue
    return sorted(found.values(), key=lambda h: h.comment_id)


def pending(
    commands: Sequence[CommentCommand], handled: Sequence[Handled], only: int | None = None
) -> list[CommentCommand]:
    """Commands not run yet, oldest first; with `only`, just that comment's."""
    done = {h.comment_id for h in handled}
    return [
        c
        for c in sorted(commands, key=lambda c: (c.at, c.comment_id))
        if c.comment_id not in done and only in (None, c.comment_id)
    ]
