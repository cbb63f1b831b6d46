"""The capacity search: bracket, then bisect on one speed grid, within a bounded number of
runs (pure: the probe is a function of the speed)."""

from __future__ import annotations

import pytest

from reconciler.optimize.capacity import STEPS, Ladder, grid, rounded, search, speed_at


def edge_at(limit: float, seen: list[float]) -> tuple[object, object]:
    def probe(speed: float) -> float:
        seen.append(speed)
        return speed

    return probe, lambda speed: speed <= limit


@pytest.mark.parametrize(
    ("limit", "start"),
    [(3.3, 1.0), (0.3, 1.0), (1.0, 1.0), (40.0, 1.0), (5.0, 4.0), (5.0, 6.0)],
    ids=["up", "down", "at-start", "far-up", "from-below", "from-above"],
)
def test_the_highest_grid_speed_that_holds_is_found(limit: float, start: float) -> None:
    seen: list[float] = []
    probe, held = edge_at(limit, seen)
    found = search(probe, held, Ladder(start=start, max_runs=12))  # type: ignore[arg-type]
    assert found.capacity is not None
    best = found.capacity.speed
    assert best <= limit < speed_at(grid(best) + 1)  # the grid point just below the edge
    assert all(s == speed_at(grid(s)) for s in seen)  # every speed on the grid
    assert len(seen) == len(set(seen))  # never the same speed twice


def test_a_search_stops_at_its_most_runs() -> None:
    seen: list[float] = []
    probe, held = edge_at(3.3, seen)
    found = search(probe, held, Ladder(max_runs=3))  # type: ignore[arg-type]
    assert len(found.tried) == 3 and found.capacity is not None
    assert found.capacity.speed <= 3.3


def test_no_speed_holds_gives_the_slowest_run() -> None:
    found = search(lambda s: s, lambda _s: False, Ladder())
    assert found.capacity is None and found.best is found.slowest
    assert found.slowest.speed == pytest.approx(1 / 16)


def test_two_replicas_land_on_the_doubled_grid_point() -> None:
    """A deployment with twice the capacity of another finds exactly twice its speed: the
    grid is the same for every search, and doubling is STEPS grid steps."""
    one = search(lambda s: s, lambda s: s <= 2.7, Ladder()).capacity
    two = search(lambda s: s, lambda s: s <= 5.4, Ladder()).capacity
    assert one is not None and two is not None
    assert grid(two.speed) == grid(one.speed) + STEPS


def test_a_repeat_searches_near_a_capacity_found() -> None:
    seen: list[float] = []
    probe, held = edge_at(2.0, seen)
    found = search(probe, held, Ladder().near(2.0))  # type: ignore[arg-type]
    # holds; two steps up misses; the one between misses: done, within the three runs
    assert seen == [2.0, speed_at(grid(2.0) + 2), speed_at(grid(2.0) + 1)]
    assert found.capacity is not None and found.capacity.speed == 2.0
    seen.clear()
    probe, held = edge_at(1.7, seen)  # lower than found before: two steps down, two more
    found = search(probe, held, Ladder().near(2.0))  # type: ignore[arg-type]
    assert seen == [2.0, speed_at(grid(2.0) - 2), speed_at(grid(2.0) - 4)]
    assert found.capacity is not None and found.capacity.speed <= 1.7


def test_speeds_and_rates_print_rounded_for_people_and_never_alike() -> None:
    assert [rounded(x) for x in (8.72406, 0.25, 1.04427, 34.6234, 99.7, 1250.4)] == [
        "8.7", "0.25", "1.04", "34.6", "99.7", "1,250"
    ]  # fmt: skip
    speeds = [speed_at(point) for point in range(-64, 128)]
    assert len({rounded(s) for s in speeds}) == len(speeds)  # two runs never read alike
