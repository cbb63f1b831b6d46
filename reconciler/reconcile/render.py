"""Pure logic: a plan as text — like `terraform plan`, for the terminal — and as the view of its
pull-request comment (forge/templates/plan.md renders it). `+` start, `~` replace (with what
changes), `-` stop; grouped by release, stage and fleet, each with its GPUs before and after.
Units that stay as they are are counted, not listed."""

from __future__ import annotations

from collections.abc import Sequence

from reconciler.forge.views import PlanFleet, PlanGroup, PlanView
from reconciler.reconcile.plan import Action, ActionKind, FleetUsage, Group, Plan

# A kept unit is shown only while its job waits in a scheduler's queue.
SYMBOLS = {
    ActionKind.START: "+",
    ActionKind.REPLACE: "~",
    ActionKind.STOP: "-",
    ActionKind.KEEP: "…",
}


def indices(gpus: Sequence[int]) -> str:
    """0,1,2,3,6 -> '0-3,6'."""
    runs: list[list[int]] = []
    for index in sorted(gpus):
        if runs and index == runs[-1][-1] + 1:
            runs[-1].append(index)
        else:
            runs.append([index])
    return ",".join(f"{r[0]}-{r[-1]}" if len(r) > 2 else ",".join(map(str, r)) for r in runs)


def _units(count: int) -> str:
    return f"{count} unit{'s' * (count != 1)}"


def summary(plan: Plan) -> str:
    counts = plan.counts
    if plan.empty:
        line = f"No changes: {_units(counts['keep'])} up to date."
    else:
        line = (
            f"Plan: {counts['start']} to start, {counts['replace']} to replace, "
            f"{counts['stop']} to stop, {counts['keep']} unchanged."
        )
    if missed := plan.unreachable:
        line += f" {missed} host{'s' * (missed != 1)} not reached: what runs there is not known."
    if left := len(plan.left):
        line += f" {_units(left)} orphaned, left running: `denv prune` stops them."
    return line


def _short(revision: str | None) -> str:
    return revision[:12] if revision else "…"


def group_title(group: Group) -> str:
    title = f"{group.release} / {group.stage} / {group.fleet}"
    running = [_short(r) for r in group.running_revisions]
    if group.error is not None:
        revision = "not planned"
    elif group.orphaned:
        revision = "orphaned (not in git; left running)"
    elif group.revision is None:
        revision = "removed"
    elif running and running != [_short(group.revision)]:
        revision = f"revision {', '.join(running)} → {_short(group.revision)}"
    else:
        revision = f"revision {_short(group.revision)}"
    scale = f" — replicas {group.scale}" if group.scale is not None else ""
    return f"{title} — {revision} — GPUs {group.gpus_before} → {group.gpus_after}{scale}"


def queued(action: Action) -> bool:
    """A kept unit whose job the scheduler has not started yet."""
    return action.kind == ActionKind.KEEP and action.running is not None and action.running.pending


def action_lines(actions: Sequence[Action], symbols: dict[ActionKind, str]) -> list[str]:
    """One line per action, columns aligned, then one indented line per change; a unit kept
    while its job waits in the scheduler's queue is shown too (pending: Resources)."""
    shown = [a for a in actions if a.kind != ActionKind.KEEP or queued(a)]
    width = max((len(a.unit) for a in shown), default=0)
    host_width = max((len(a.host) for a in shown), default=0)
    lines = []
    for action in shown:
        gpus = action.gpus_before if action.kind == ActionKind.STOP else action.gpus_after
        where = f"GPUs {indices(gpus)}" if gpus else "no GPUs"
        port = f"port {action.port}" if action.port is not None else "no port"
        reason = action.reason
        if action.surge is not None:
            reason += ", surge" if action.surge else ", in place (no free GPUs for a surge)"
        elif action.kind == ActionKind.REPLACE:
            reason += ", in place"
        lines.append(
            f"{symbols[action.kind]} {action.unit:<{width}}  {action.host:<{host_width}}  "
            f"{where:<10}  {port:<10}  {reason}"
        )
        for change in action.changes:
            lines.append(f"      {_change(change.field, change.name, change.old, change.new)}")
    return lines


def _change(field: str, name: str | None, old: str | None, new: str | None) -> str:
    label = name if field == "argv" else {"gpus": "GPUs", "port": "port", "env": "env"}[field]
    if field == "env":
        return "environment changed"
    return f"{label}: {'(absent)' if old is None else old or '(set)'} → " + (
        "(absent)" if new is None else new or "(set)"
    )


def fleet_line(usage: FleetUsage) -> str:
    line = f"fleet {usage.fleet}: GPUs in use {usage.before} → {usage.after}"
    if usage.gpus is not None:
        line += f" of {usage.gpus} ({usage.trial_gpus} kept for trials)"
    if not usage.observed:
        line += ", hosts as declared (not observed)"
    for _, why in sorted(usage.unreachable.items()):
        line += f"\n  {why}"  # one line a host, its name first, then the cause
    return line


def _by_group(plan: Plan) -> dict[tuple[str, str, str], list[Action]]:
    found: dict[tuple[str, str, str], list[Action]] = {}
    for action in plan.actions:
        found.setdefault((action.release, action.stage, action.fleet), []).append(action)
    return found


def _notes(plan: Plan) -> list[str]:
    """Stages that run nothing: not deployed yet, or not planned (what runs is left alone)."""
    notes = [f"{e.where}: not planned — {e.message}" for e in plan.errors if e.fleet is None]
    notes += [f"{p.release} / {p.stage}: {p.reason}" for p in plan.pending]
    notes += [f"invalid file: {line}" for line in plan.invalid_files]
    return notes + [orphan.text() for orphan in plan.orphans]


def _indented(text: str, prefix: str) -> str:
    """Continuation lines of a multi-line message, indented under its first."""
    return text.replace("\n", "\n" + prefix)


def render_text(plan: Plan) -> str:
    sections = [f"denv plan at {_short(plan.head)}"]
    actions = _by_group(plan)
    for group in plan.groups:
        mine = actions.get((group.release, group.stage, group.fleet), [])
        kept = sum(1 for a in mine if a.kind == ActionKind.KEEP)
        lines = [group_title(group) + (f" — {kept} unchanged" if kept else "")]
        if group.error is not None:
            lines.append(f"  left as it runs: {_indented(group.error, '    ')}")
        lines += [f"  {line}" for line in action_lines(mine, SYMBOLS)]
        if group.endpoint:
            lines.append(f"  endpoint {group.endpoint}")
        sections.append("\n".join(lines))
    if notes := _notes(plan):
        sections.append("\n".join(_indented(note, "    ") for note in notes))
    if plan.fleets:
        sections.append("\n".join(fleet_line(usage) for usage in plan.fleets))
    sections.append(summary(plan))
    return "\n\n".join(sections) + "\n"


# GitHub colours `!` lines of a diff block orange: the replace marker in markdown.
MARKDOWN_SYMBOLS = {
    ActionKind.START: "+",
    ActionKind.REPLACE: "!",
    ActionKind.STOP: "-",
    ActionKind.KEEP: "#",  # a job waiting in the scheduler's queue: a comment line
}


def plan_view(
    plan: Plan, base: str | None = None, files: Sequence[str] = (), note: str | None = None
) -> PlanView:
    """The plan as a pull request's plan comment shows it (forge/templates/plan.md): of pull
    request `base` ← `plan.head` changing `files`, or with no base of a revision alone."""
    actions = _by_group(plan)
    groups = []
    for group in plan.groups:
        mine = actions.get((group.release, group.stage, group.fleet), [])
        groups.append(
            PlanGroup(
                title=group_title(group),
                error=group.error,
                lines=action_lines(mine, MARKDOWN_SYMBOLS),
                kept=sum(1 for a in mine if a.kind == ActionKind.KEEP),
                endpoint=group.endpoint or None,
            )
        )
    fleets = [
        PlanFleet(
            fleet=u.fleet, before=u.before, after=u.after, gpus=u.gpus, trial_gpus=u.trial_gpus
        )
        for u in plan.fleets
    ]
    return PlanView(
        head_sha=plan.head,
        base=base,
        files=list(files),
        note=note,
        summary=summary(plan),
        groups=groups,
        notes=_notes(plan),
        fleets=fleets,
        unreachable=[why for u in plan.fleets for _, why in sorted(u.unreachable.items())],
    )
