"""Pure logic: how many requests each load level of `denv bench run` sends when `--requests`
is not given, so that a run at the default levels ends in about two minutes.

Closed loop: the sweep's own default (a warm-up of one request a client, then ten a client,
at least 50: `sweep.level_lines`), cut to what is predicted to end within LEVEL_BUDGET_S
(the simulator's performance model for the recipe on the fleet's hardware, in virtual time),
and never below two rounds of the clients (the warm-up and one measured request each): the
prediction is of those two rounds, scaled, as a closed loop's rounds take alike. Open
loop: at most LEVEL_BUDGET_S of arrivals at the level's rate. A level that is cut says so,
with how to ask for more (`--requests N`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from reconciler.bench.levels import Mode, level_label, level_lines
from reconciler.bench.traffic import TraceLine
from reconciler.engines.model.predict import predict
from reconciler.engines.model.traffic import traced
from reconciler.errors import DenvError
from reconciler.spec.catalog import Hardware, ModelArch
from reconciler.spec.recipe import Recipe

# Three default levels of about 25 s (concurrency 32's two rounds may take longer), with the
# deployment's start and teardown: within two minutes.
LEVEL_BUDGET_S = 25.0
# (lines sent, clients) -> seconds until the last answer, as predicted; None: no model.
Predict = Callable[[Sequence[TraceLine], int], float | None]


@dataclass(frozen=True)
class LevelPlan:
    level: float
    requests: int  # what the level sends
    default: int  # what it would send without the budget
    predicted_s: float | None = None  # for `requests`, where a model predicts it

    @property
    def cut(self) -> bool:
        return self.requests < self.default


def simulated(recipe: Recipe, hardware: Hardware | None, model: ModelArch | None) -> Predict:
    """The simulator's prediction of a closed-loop level, in virtual time: what `denv sim
    predict` says; None where it has no model of the recipe, hardware or model."""

    def seconds(lines: Sequence[TraceLine], clients: int) -> float | None:
        if hardware is None or model is None or not lines:
            return None
        try:
            run = predict(recipe, hardware, model, traced(list(lines)), clients, warmup=0)
        except (DenvError, ValueError):
            return None
        return run.duration_s

    return seconds


def plan_levels(
    lines: Sequence[TraceLine],
    mode: Mode,
    levels: Sequence[float],
    predict: Predict,
    budget_s: float = LEVEL_BUDGET_S,
) -> list[LevelPlan]:
    """Each level's default request count within `budget_s` (see the module's docstring)."""
    return [_plan(lines, mode, level, predict, budget_s) for level in levels]


def _plan(
    lines: Sequence[TraceLine], mode: Mode, level: float, predict: Predict, budget_s: float
) -> LevelPlan:
    default = len(level_lines(lines, mode, level, None))
    if mode == "rate":  # arrivals at `level` a second: the budget holds level × budget of them
        return LevelPlan(level, min(default, max(2, int(level * budget_s) + 1)), default)
    if mode != "concurrency":
        return LevelPlan(level, default, default)
    clients = int(level)
    # the fewest worth measuring: the warm-up round and one measured request a client;
    # predicted, then scaled (a closed loop's rounds take alike), which keeps this cheap
    floor = min(default, 2 * clients)
    took = predict(lines[:floor], clients)
    if took is None:
        return LevelPlan(level, default, default)
    fits = int(floor * budget_s / took) if took > 0 else default
    wanted = min(default, max(floor, fits))
    return LevelPlan(level, wanted, default, wanted * took / floor)


def describe(plan: Sequence[LevelPlan], mode: Mode) -> list[str]:
    """One line a level that the budget cut, and how to ask for more; none when none was."""
    cut = [p for p in plan if p.cut]
    if not cut:
        return []
    out = [
        f"{level_label(mode, p.level)}: {p.requests} requests of a default {p.default}"
        + (f" (about {p.predicted_s:.0f} s predicted)" if p.predicted_s is not None else "")
        for p in cut
    ]
    out.append(
        f"each level is cut to about {LEVEL_BUDGET_S:.0f} s by default, as the simulator "
        "predicts it; for more requests a level (steadier percentiles), give --requests N"
    )
    return out
