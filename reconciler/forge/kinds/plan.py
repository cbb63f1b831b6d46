"""Pure logic: the plan comment (`<!-- denv:plan -->`, templates/plan.md) from a `PlanView`:
what the reconciler would change for a pull request's head, group by group."""

from __future__ import annotations

from collections.abc import Sequence

from reconciler.forge.render import Fill, code, quoted, short, table, text
from reconciler.forge.views import PlanFleet, PlanGroup, PlanView

PLAN_LINES_PER_GROUP = 50  # a PR comment stays readable (and under GitHub's size limit)


def _indented(plain: str) -> str:
    """A list item's text, its continuation lines indented under its first."""
    return text(plain).replace("\n", "\n  ")


def _plan_summary(view: PlanView) -> str:
    if view.problems:
        listing = quoted("\n".join(view.problems))
        return f"**Invalid files: nothing will be applied.**\n\n{listing}"
    return view.summary


def _plan_group(group: PlanGroup) -> str:
    lines = [f"**{group.title}**", ""]
    if group.error is not None:
        lines += ["Left as it runs:", "", quoted(group.error)]
    if group.lines:
        lines.append(quoted("\n".join(group.lines[:PLAN_LINES_PER_GROUP]), "diff"))
        if (more := len(group.lines) - PLAN_LINES_PER_GROUP) > 0:
            lines.append(f"… and {more} more lines: run `denv plan` to see them all.")
    if group.kept:
        lines.append(f"{group.kept} unit{'s' * (group.kept != 1)} unchanged.")
    if group.endpoint:
        lines.append(f"Endpoint: `{group.endpoint}`")
    return "\n".join(lines)


def _plan_fleets(fleets: Sequence[PlanFleet]) -> str:
    if not fleets:
        return ""
    rows = [
        (
            f.fleet,
            str(f.before),
            str(f.after),
            "…" if f.gpus is None else str(f.gpus),
            "…" if f.trial_gpus is None else str(f.trial_gpus),
        )
        for f in fleets
    ]
    headers = ("fleet", "GPUs in use before", "after", "of", "kept for trials")
    return table(headers, rows, right=(1, 2, 3, 4))


def _plan_details(view: PlanView) -> str:
    if view.problems:
        return ""
    parts = [_plan_group(g) for g in view.groups]
    parts.append("\n".join(f"- {_indented(note)}" for note in view.notes))
    parts.append(_plan_fleets(view.fleets))
    if view.unreachable:
        parts.append("Hosts not reached:\n\n" + quoted("\n".join(view.unreachable)))
    return "\n\n".join(p for p in parts if p)


def _files(paths: Sequence[str]) -> str:
    if not paths:
        return ""
    listing = "\n".join(f"- {code(p)}" for p in paths)
    return f"<details><summary>Files changed ({len(paths)})</summary>\n\n{listing}\n\n</details>"


def render(view: PlanView, fill: Fill) -> str:
    return fill(
        head=short(view.head_sha),
        against=f" against `{view.base}`" if view.base else "",
        note=f"> {view.note}" if view.note else "",
        summary=_plan_summary(view),
        details=_plan_details(view),
        files=_files(view.files),
    )
