"""An elastic stage on the UI's pages, from a real look at a repository whose canary keeps
1 to 8 replicas and a bot's lease note that scaled it 1 → 2 → 4: the overview's READY with
the bounds, and the release page's replicas over time against the arrival rate, with each
decision and its signals. No engine runs: the note is written as a bot would leave it."""

from __future__ import annotations

import os
import re
import time
from html import unescape
from pathlib import Path

import pytest
from playwright.sync_api import expect

from reconciler.ui.charts import replicas_chart
from reconciler.ui.state import UiState
from tests.reconcile.conftest import GitRepo, git_repo
from tests.rollout.test_status_scaling import KEY, WHY, leave_note, make_elastic, scaling_note
from tests.ui.conftest import Pages, screenshot
from tests.ui.looked import look
from tests.ui.test_server import get, serve

__all__ = ["git_repo"]  # the fixture


@pytest.fixture
def elastic(git_repo: GitRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> UiState:
    home = tmp_path / "home"
    monkeypatch.setenv("DENV_HOME", str(home))
    make_elastic(git_repo)
    env = {"DENV_HOME": str(home), "PATH": "/usr/bin:/bin"}
    env["DENV_MACHINE_DIR"] = os.environ["DENV_MACHINE_DIR"]  # the test's local leases
    leave_note(env, scaling_note(time.time()))
    return look(git_repo.path, git_repo.cache)


def test_the_release_page_draws_replicas_over_time_against_the_load(elastic: UiState) -> None:
    for url in serve(elastic):
        overview = get(url)[1]
        canary = overview.split(f'data-key="{KEY}"')[1].split("</tr>")[0]
        assert ">0/3 (1–8) +1 pending<" in canary
        assert f"{KEY}: replicas 3 (1–8), 1 pending: {WHY}" in unescape(overview)

        page = get(url + "releases/chat-8b")[1]
        block = page.split(f'data-deployment="{KEY}"')[1].split('<div class="scaling"')[0]
        assert f"local: <strong>3 (1–8), 1 pending</strong>: {WHY}" in block
        label = re.search(r'<svg class="spark scaling" role="img" aria-label="([^"]*)"', block)
        assert label is not None and unescape(label[1]) == (
            f"{KEY}: replicas 1→2→4; arrival 9–26 req/s"
        )
        cells = [
            [unescape(re.sub(r"<[^>]*>", "", c)).strip() for c in re.findall(r"<td.*?</td>", r)]
            for r in re.findall(r"<tr>(.*?)</tr>", block.split("<tbody>")[1])
        ]
        assert [c[1:3] for c in cells] == [
            ["1 → 2", "3 requests waiting on a replica"],
            ["2 → 4", WHY],
        ]
        assert cells[1][3] == (
            "arrival 26 req/s, capacity 9.7 req/s per replica, waiting 3, KV 45%, 1 serving"
        )
        assert cells[0][0].endswith(" UTC")


def test_the_chart_steps_at_each_decision_and_says_so() -> None:
    svg = str(replicas_chart([(0.0, 1), (10.0, 2), (20.0, 2)], [(0.0, 5.0), (20.0, 9.0)], "a"))
    steps = re.search(r'class="replicas"[^>]*points="([^"]*)"', svg)
    assert steps is not None and len(steps[1].split()) == 5  # start, up at 10 s, and now
    assert 'aria-label="a: replicas 1→2; arrival 5–9 req/s"' in svg
    assert "no scaling decision yet" in str(replicas_chart([(0.0, 1)], [], "a"))
    assert "&lt;b&gt;" in str(replicas_chart([(0.0, 1), (1.0, 2)], [], "<b>"))


def test_the_scaling_history_fits_a_phone_and_a_desktop(elastic: UiState, pages: Pages) -> None:
    """In Chromium: the chart is drawn and the decisions' table scrolls in its own box, the
    page never wider than the screen."""
    for url in serve(elastic):
        for phone in (False, True):
            page = pages(phone=phone)
            answer = page.goto(url + "releases/chat-8b")
            assert answer is not None and answer.status == 200
            block = page.locator(f'[data-deployment="{KEY}"]')
            expect(block.locator("svg.scaling polyline.replicas")).to_be_visible()
            expect(block.locator("table.events tbody tr")).to_have_count(2)
            size = page.viewport_size
            assert size is not None
            assert page.evaluate("document.documentElement.scrollWidth") <= size["width"]
            screenshot(page, "release-elastic-phone" if phone else "release-elastic")
