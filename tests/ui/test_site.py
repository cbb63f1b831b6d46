"""The UI's pure parts: links for the server and for an export, state words to classes, the
alarm sparkline, and the history a look adds to."""

from __future__ import annotations

import re

import pytest

from reconciler.ui.charts import sparkline
from reconciler.ui.overview import state_kind
from reconciler.ui.site import Links, Route, export_name
from reconciler.ui.state import UiState

ROUTES = [
    Route("overview", "/", lambda s, p: None),  # type: ignore[arg-type,return-value]
    Route("release", "/releases/{name}", lambda s, p: None),  # type: ignore[arg-type,return-value]
    Route("results", "/results", lambda s, p: None),  # type: ignore[arg-type,return-value]
]


def test_server_links_are_paths_with_the_query_escaped() -> None:
    url = Links(ROUTES)
    assert url("overview") == "/"
    assert url("release", name="chat 8b/x") == "/releases/chat%208b%2Fx"
    assert url("results", workload="agent", latency="p99<1.5s", model=None) == (
        "/results?workload=agent&latency=p99%3C1.5s"
    )


def test_export_links_are_flat_file_names() -> None:
    url = Links(ROUTES, export=True)
    assert url("overview") == "index.html"
    assert url("release", name="chat-8b") == "release-chat-8b.html"
    assert (
        url("results", rank="cost", workload="agent") == "results--rank-cost--workload-agent.html"
    )
    assert export_name("results", [], {"latency": "p99<1.5s"}) == "results--latency-p99_1.5s.html"
    assert url.static("denv.css") == "static/denv.css"
    assert Links(ROUTES).static("denv.css") == "/static/denv.css"


@pytest.mark.parametrize(
    ("words", "kind"),
    [
        ("baking 12s/30s", "baking"),
        ("baked 30s, judged at the bot's next pass", "baking"),
        ("green", "green"),
        ("rolled back to 3eea9f93d8f9 (c3ce6522247f rejected: ttft p99 973 ms > 500 ms)", "bad"),
        ("rejected, nothing earlier to return to (x)", "bad"),
        ("degraded: parity", "bad"),
        ("deploying", "deploying"),
        ("waiting for the bot", "deploying"),
        ("not deployed", "idle"),
    ],
)
def test_state_words_map_to_a_class(words: str, kind: str) -> None:
    assert state_kind(words) == kind


def test_a_sparkline_draws_the_known_readings_and_says_them_in_words() -> None:
    svg = str(sparkline([(0.0, 0.2), (1.0, None), (2.0, 0.9), (3.0, 0.5)], "ttft-fast"))
    points = re.search(r'points="([^"]*)"', svg)
    assert points is not None and len(points.group(1).split()) == 3  # the gap is left out
    assert 'aria-label="ttft-fast: last 0.5, range 0.2–0.9, 3 readings"' in svg
    assert "not enough readings" in str(sparkline([(0.0, 1.0)], "x"))
    assert "&lt;b&gt;" in str(sparkline([], "<b>"))  # a name is text, never markup


def test_the_history_keeps_the_last_readings_of_each_stage() -> None:
    from reconciler.rollout.overview import Overview
    from reconciler.rollout.state import AlarmValue
    from reconciler.rollout.status import StageStatus

    state = UiState()
    for at in range(300):
        alarm = AlarmValue(name="ttft-fast", value=at / 1000, requests=5, firing=at == 299,
                           text="")  # fmt: skip
        stage = StageStatus(stage="canary", fleets=["local"], revision=None, running=None,
                            state="baking", alarms=[alarm])  # fmt: skip
        seen = Overview(snap=_Snap(), rows=[], notes={}, reach={}, overrides=[], at=float(at))  # type: ignore[arg-type]
        seen.stages = {"chat-8b": [stage]}
        state.record(seen)
    kept = state.history["chat-8b/canary"]
    assert len(kept) == 240 and kept[0].at == 60.0 and kept[-1].firing == ["ttft-fast"]
    assert state.looks == 300 and state.at == 299.0


class _Snap:
    repo = None
    head = "0" * 40
