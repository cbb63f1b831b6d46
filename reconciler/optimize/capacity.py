"""Pure logic: the capacity search — the highest speed (a multiple of the traffic's recorded
arrival rate, its own pattern time-scaled) at which a deployment holds the stage's target.

A probe runs the traffic once at a speed (a trial on GPUs, or the simulator's prediction)
and says whether it held. Speeds lie on one grid for every search, 2^(i/STEPS) (steps of
4.4%), so that two deployments whose capacities are equal, or one twice the other (two
replicas of one), land on the same or the doubled grid point: the figure per GPU does not
depend on which ladder found it. The search brackets, then bisects on the grid:

1. at `start` (the recorded rate, or a figure known already: the current release's capacity
   for a candidate, a side's own capacity for a verification repeat), snapped to the grid;
2. it held: up by `factor` grid steps until a speed misses (or `highest`); it missed: down by
   `factor` until one holds (or `lowest`);
3. between the highest speed that held and the lowest that missed, the middle grid point,
   until they are neighbours (or `resolution` steps apart: the pre-screen's coarser search);

never more than `max_runs` probes. The capacity is the highest speed that held; none when
every speed tried missed. The same ladder runs for every candidate, measured or predicted,
so their figures compare; its resolution is one grid step.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

T = TypeVar("T")


STEPS = 16  # grid points per doubling


def grid(speed: float) -> int:
    """The grid point nearest `speed`."""
    return round(math.log2(speed) * STEPS)


def speed_at(point: int) -> float:
    return float(f"{2 ** (point / STEPS):.6g}")


def rounded(value: float) -> str:
    """A speed or a rate for people: two significant figures (`8.7`, `0.25`, `35`), a third
    where two would be more than 1% off (`1.04`: two grid speeds, 4.4% apart, never read
    alike), whole numbers from 100 (`1,250`). The stored figures keep their digits."""
    if abs(value) >= 100:
        return f"{value:,.0f}"
    short = f"{value:.2g}"
    if "e" in short or abs(float(short) - value) > 0.01 * abs(value):
        return f"{value:.3g}"
    return short


@dataclass(frozen=True)
class Ladder:
    """How a search moves; speeds are multiples of the traffic's recorded rate."""

    start: float = 1.0
    factor: int = STEPS  # grid steps a bracketing move takes: ×2
    resolution: int = 1  # bisect until the bracket's ends lie this many grid steps apart
    max_runs: int = 8
    lowest: float = 1 / 16
    highest: float = 64.0

    def near(self, speed: float) -> Ladder:
        """A verification repeat's ladder: from a capacity found, three runs at most (holds:
        two grid steps up, then one between when that misses; misses: two steps down, and
        two more when that misses too)."""
        return Ladder(start=speed, factor=2, max_runs=3, lowest=self.lowest, highest=self.highest)


# The latency goal reads the traffic at its own rate: one run, no search.
AT_RECORDED_RATE = Ladder(max_runs=1)


@dataclass(frozen=True)
class Tried(Generic[T]):
    speed: float
    result: T
    held: bool


@dataclass(frozen=True)
class Found(Generic[T]):
    tried: list[Tried[T]] = field(default_factory=list)

    @property
    def capacity(self) -> Tried[T] | None:
        """The highest speed that held; None when none did."""
        held = [t for t in self.tried if t.held]
        return max(held, key=lambda t: t.speed, default=None)

    @property
    def slowest(self) -> Tried[T]:
        """The lowest speed tried (what a search that found nothing reports)."""
        return min(self.tried, key=lambda t: t.speed)

    @property
    def best(self) -> Tried[T]:
        return self.capacity or self.slowest


def search(probe: Callable[[float], T], held: Callable[[T], bool], ladder: Ladder) -> Found[T]:
    """The capacity search (module docstring): `probe(speed)` runs once, `held(result)` says
    whether that run held the target."""
    tried: list[Tried[T]] = []
    bottom, top = grid(ladder.lowest), grid(ladder.highest)

    def at(point: int) -> tuple[int, Tried[T]]:
        speed = speed_at(point)
        result = probe(speed)
        one = Tried(speed, result, held(result))
        tried.append(one)
        return point, one

    def room() -> bool:
        return len(tried) < ladder.max_runs

    start = min(max(grid(ladder.start), bottom), top)
    point, first = at(start)
    low = point if first.held else None  # the highest point that held
    high = None if first.held else point  # the lowest point that missed
    while room() and high is None and low is not None and low < top:
        point, step = at(min(low + ladder.factor, top))
        low, high = (point, None) if step.held else (low, point)
    while room() and low is None and high is not None and high > bottom:
        point, step = at(max(high - ladder.factor, bottom))
        low, high = (point, high) if step.held else (None, point)
    while room() and low is not None and high is not None and high - low > ladder.resolution:
        point, step = at((low + high) // 2)
        low, high = (point, high) if step.held else (low, point)
    return Found(tried)
