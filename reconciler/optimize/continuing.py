"""Pure logic: whether `denv optimize start` continues the last study.

The study's name carries digests of the current recipe, of the traffic and of how a run is
measured, and the levers searched when they are not all of them: starting again on the same
release, traffic and levers continues the study (optuna keeps its trials, the candidates file
its rows); a changed release, traffic or run length starts a new one, and other `--levers` a
new one whose name says so (`….levers-kv_dtype+max_batch`).

Starting a finished study again: a `--max-trials` above the trials it used continues it;
`--auto` promotes its verified winner (loop.run, before any trial); one whose trials are
spent runs none and says so — and an explicit `--max-trials` that allows none is refused.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from reconciler.errors import UsageError
from reconciler.optimize.candidates import Status, StudyState, retriable
from reconciler.optimize.goal import Goal

# What a run measures: goodput per GPU at the capacity the search finds (capacity.py). A
# study of another definition (tok/s/GPU at a fixed concurrency) is never continued.
MEASURE = "open-loop capacity search, goodput/GPU"


def study_name(
    release: str,
    stage: str,
    goal: Goal,
    recipe: str,
    traffic: str,
    marks: str,
    runs: str = MEASURE,
    levers: Sequence[str] | None = None,
) -> str:
    """`<release>.<stage>.<goal>.<digest>`, the digest over the current recipe, the traffic,
    the catalog marks and how runs measure (`runs`); `.levers-a+b` when only some levers are
    searched."""
    digest = hashlib.sha256(f"{recipe}\n{traffic}\n{marks}\n{runs}".encode()).hexdigest()[:8]
    searched = f".levers-{'+'.join(sorted(set(levers)))}" if levers else ""
    return f"{release}.{stage}.{goal}.{digest}{searched}"


def finished_study_note(
    previous: StudyState, used: int, max_trials: int, explicit: int | None, auto: bool
) -> str | None:
    """What starting the finished study `previous` again does when its trials are spent: None
    when it has trials left; UsageError when an `explicit` --max-trials allows none and there
    is no --auto to act on (the command would do nothing it was asked to)."""
    if used < max_trials:
        return None
    retries = "".join(
        f"; {r.id} is inconclusive: `{r.retry}` verifies it again"
        for r in previous.candidates
        if r.status is Status.INCONCLUSIVE and r.retry
    )
    if explicit is not None and not auto:
        raise UsageError(
            f"{previous.key}: study {previous.study} has used {used} trials already; "
            f"--max-trials {explicit} allows no more: give more than {used} to continue it"
            + retries
        )
    return (
        f"study {previous.study} is finished ({used} of {max_trials} trials): nothing to trial; "
        f"--max-trials above {used} continues it, other --levers start a new study{retries}"
    )


def check_retry(previous: StudyState | None, candidate: str, name: str) -> None:
    """UsageError unless the study `name` has `candidate` inconclusive, or verified already
    (`--verify`: a retry run twice, or after another verified it, is no error)."""
    if previous is None:
        raise UsageError(
            f"--verify {candidate}: no study {name} to continue: give the options of the "
            "`denv optimize start` that trialed it (the retry command it printed has them)"
        )
    row = previous.row(candidate)
    if row is not None and row.status is Status.VERIFIED:
        return  # verified already: the retry does nothing (Loop.reverify says so)
    if row is None or not retriable(row):
        shown = ", ".join(r.id for r in previous.candidates if retriable(r)) or "none"
        state = f"it is {row.status.value}" if row is not None else "no such candidate"
        raise UsageError(
            f"--verify {candidate}: only an inconclusive candidate is verified again "
            f"({state}; inconclusive in study {name}: {shown})"
        )
