"""Pure logic: the bot's commands comment (`<!-- denv:commands -->`, templates/commands.md)
from a `CommandsView`: every `/denv` command it took up and what came of it, with the hidden
copy of that list that forge/handled.py reads back."""

from __future__ import annotations

import json

from reconciler.forge.handled import Handled
from reconciler.forge.models import Record
from reconciler.forge.render import Fill, code, table


class CommandsView(Record):
    handled: list[Handled]


def render(view: CommandsView, fill: Fill) -> str:
    # the outcome may quote an engine or a host (a failed run): shown as written
    rows = [
        (f"comment {h.comment_id}", h.user, f"/denv {h.command}", code(h.outcome))
        for h in view.handled
    ]
    listing = table(("comment", "by", "command", "outcome"), rows) if rows else "None yet."
    # the hidden list must not end its HTML comment early: no '>' inside it
    hidden = [h.model_dump() for h in view.handled]
    state = json.dumps(hidden, ensure_ascii=True).replace(">", "\\u003e")
    return fill(listing=listing, state=state)
