"""The explorer's Pareto chart on a small hand-made set: which points are on the frontier,
and how each point is drawn (its kind's colour and shape, its link, its labels)."""

from __future__ import annotations

import re

from reconciler.ui.pareto import Point, chart, frontier, nice_ticks


def point(name: str, x: float, y: float, kind: str = "published") -> Point:
    return Point(name, x, y, kind, f"{name}: {x} tok/s per user, {y} tok/s/GPU")


SET = [
    point("fast", 100, 10),  # the most interactive
    point("dense", 5, 900, "simulated"),  # the most throughput
    point("middle", 40, 500, "measured"),
    point("beaten", 30, 400),  # middle is better on both
    point("tie-lower", 100, 8),  # as interactive as fast, less throughput
    point("knee", 60, 300),
    point("under-knee", 55, 290, "simulated"),
]


def test_the_frontier_keeps_the_points_nothing_beats_on_both() -> None:
    assert [p.result for p in frontier(SET)] == ["dense", "middle", "knee", "fast"]
    assert frontier([]) == []
    assert [p.result for p in frontier([point("a", 1, 1), point("b", 1, 1)])] == ["a"]


def test_each_point_links_to_its_result_with_its_kind_s_shape() -> None:
    svg = str(chart(SET, lambda r: f"result-{r}.html", "a hand-made set"))
    tags = {
        m.group(1): m.group(0)
        for m in re.finditer(r'<a [^>]*data-result="([^"]+)".*?</a>', svg, re.S)
    }
    assert set(tags) == {p.result for p in SET}
    on_edge = {name for name, tag in tags.items() if "data-frontier" in tag}
    assert on_edge == {"dense", "middle", "knee", "fast"}
    assert 'href="result-knee.html"' in tags["knee"]
    assert "<circle" in tags["knee"] and "kind-published" in tags["knee"]
    assert "<rect" in tags["middle"] and "kind-measured" in tags["middle"]
    assert "<polygon" in tags["dense"] and "kind-simulated" in tags["dense"]
    assert 'aria-label="knee: 60 tok/s per user, 300 tok/s/GPU, on the frontier"' in tags["knee"]
    assert "<title>beaten: 30 tok/s per user, 400 tok/s/GPU</title>" in tags["beaten"]
    # the tab order follows the x axis
    order = re.findall(r'data-result="([^"]+)"', svg)
    assert order == [p.result for p in sorted(SET, key=lambda p: (p.x, p.y))]
    assert 'aria-labelledby="pareto-title"' in svg and ">a hand-made set</title>" in svg


def test_the_axes_reach_past_the_highest_point() -> None:
    assert nice_ticks(900) == [0, 200, 400, 600, 800, 1000]
    assert nice_ticks(100) == [0, 20, 40, 60, 80, 100]
    assert nice_ticks(0.3)[-1] >= 0.3
    assert "No ranked result" in chart([], str, "nothing")
