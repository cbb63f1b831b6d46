"""Pure logic: when a finished study should measure again (`denv optimize start --watch`).

Three triggers, each a line of text saying why:

- the traffic shape drifted from the one the study optimized for by more than
  `rules.drift_threshold` (drift.py);
- a new engine version entered the catalog (a flag table for it: denv can now run it);
- a new recipe for the release's model landed (a recipe id, or an engine version of one).
"""

from __future__ import annotations

from reconciler.bench.traffic_stats import TraceStats
from reconciler.engines.versions import known_versions
from reconciler.optimize.candidates import StudyState
from reconciler.optimize.drift import drift
from reconciler.spec.engines import engine_names
from reconciler.spec.repo import Repo


def catalog_marks(repo: Repo, model: str) -> list[str]:
    """What the study saw of the catalog: the model's recipes (with their engine versions)
    and the engine versions denv knows flags for."""
    marks = {
        f"recipe {r.id} ({r.engine.name} {r.engine.version})"
        for r in repo.recipes.values()
        if r.model == model
    }
    marks |= {
        f"engine {engine} {version}"
        for engine in engine_names()
        for version in known_versions(engine)
    }
    return sorted(marks)


def remeasure_reasons(
    state: StudyState, shape_now: TraceStats | None, marks_now: list[str], threshold: float
) -> list[str]:
    """Why the study should run again; empty when nothing moved."""
    reasons: list[str] = []
    if shape_now is not None:
        moved = drift(state.shape, shape_now)
        if moved.exceeds(threshold):
            reasons.append(f"{moved.describe()} > {threshold:g}")
    new = sorted(set(marks_now) - set(state.catalog))
    reasons += [f"new in the catalog: {mark}" for mark in new]
    return reasons
