"""Pure logic: what a verification's runs say of a candidate — verified, inconclusive or
rejected, and why — from the runs of both sides that are evidence (candidates.evidence: a
run in which the load generator fell behind is never counted)."""

from __future__ import annotations

from reconciler.optimize.candidates import Run, evidence
from reconciler.optimize.verify import Decision, Gain, gain_interval, gain_verdict
from reconciler.spec.policy import OptimizerRules


def judge(
    runs: list[Run],
    current: list[Run],
    rules: OptimizerRules,
    higher_is_better: bool,
    searches: bool = True,
) -> tuple[Decision, str | None, Gain | None]:
    """The verdict on the candidate's `runs` against the current release's, and why; the
    gain when there is one. Too few runs that are evidence, because the load generator fell
    behind, is inconclusive; else the gain's interval decides (verify.gain_verdict). A
    candidate run that missed the target rejects it when runs are taken at the traffic's own
    rate (the latency goal); a capacity repeat (`searches`) that held at none of the few speeds
    near its capacity it tried counts with its figure, as the current release's does: the
    same rule for both sides, and its lower figure widens the interval."""
    mine_runs, theirs_runs = evidence(runs), evidence(current)
    mine = [r.goal for r in mine_runs if r.goal is not None]
    theirs = [r.goal for r in theirs_runs if r.goal is not None]
    need = min(rules.repeats, 2)
    if len(mine) < need or len(theirs) < need:
        everything = len(runs) + len(current)
        behind = everything - len(mine_runs) - len(theirs_runs)
        if behind:
            few = (
                f"the load generator fell behind in {behind} of {everything} runs: "
                "too few runs are evidence"
            )
            return "inconclusive", few, None
        if not mine or not theirs:
            return "rejected", "a verification run measured nothing", None
    gain = gain_interval(theirs, mine, higher_is_better)
    misses = [r.miss for r in mine_runs if r.miss]
    if misses and not searches:
        missed = f"misses the target in {len(misses)} of {len(mine_runs)} runs: {misses[0]}"
        return "rejected", missed, gain
    decision, why = gain_verdict(gain, rules.min_gain)
    return decision, why, gain
