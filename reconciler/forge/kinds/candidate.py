"""Pure logic: the optimizer's candidate pull request (`<!-- denv:candidate -->`,
templates/candidate.md) from a `CandidateView`: its changes, the verified gain and parity."""

from __future__ import annotations

from reconciler.forge.render import Fill, number, percent, table
from reconciler.forge.views import CandidateView


def _counted(count: int, noun: str) -> str:
    """`1 trial`, `24 trials`."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def render(view: CandidateView, fill: Fill) -> str:
    interval, runs = "", _counted(view.repeats, "run") + " each"
    if view.repeats >= 2:
        interval = f" (95% interval {percent(view.ci_low)} to {percent(view.ci_high)})"
    else:  # one run each has no interval (the optimizer's verify.gain_interval)
        runs += " (no interval)"
    rows = [(c.lever, c.current, c.candidate) for c in view.changes]
    figures = [f"| {view.metric} | {number(view.current_value)} | {number(view.candidate_value)} |"]
    measured_at = ""
    if view.current_rate is not None and view.candidate_rate is not None:
        current_rate, candidate_rate = number(view.current_rate), number(view.candidate_rate)
        figures.append(f"| capacity (req/s) | {current_rate} | {candidate_rate} |")
        held = f" `{view.latency_target}`" if view.latency_target else ""
        measured_at = (
            "Each is measured at its capacity: the highest rate of the stage's traffic (its "
            f"own arrival pattern, time-scaled) that holds the latency target{held}.\n"
        )
    return fill(
        release=view.release,
        target=view.target,
        gain=percent(view.gain),
        metric=view.metric,
        study=view.study,
        goal=view.goal,
        recipes=_recipes(view),
        simulated=" Measured on simulated GPUs." if view.simulated else "",
        changes=table(("lever", "current", "candidate"), rows),
        figures="\n".join(figures),
        measured_at=measured_at,
        interval=interval,
        runs=runs,
        trials=_counted(view.trials, "trial"),
        parity=view.parity,
    )


def _recipes(view: CandidateView) -> str:
    """What the candidate changes: its change in words on the current recipe (which names a
    new recipe when it has one), or the two recipes; never an arrow between equal things."""
    if view.change:
        return f"recipe `{view.current_recipe}`, {view.change}"
    if view.candidate_recipe != view.current_recipe:
        return f"`{view.current_recipe}` → `{view.candidate_recipe}`"
    return f"recipe `{view.current_recipe}` with the changes below"
