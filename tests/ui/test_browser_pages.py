"""The UI's pages in Chromium: the explorer's filters change the ranking and the address, a
Pareto point opens its result, the export opens from file:// with the same ranking, a token
set refuses a request without it; and a screenshot of every page. The server runs in a thread
over one real look (chat-8b reconciled onto the local fleet) and this repository's results."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from reconciler.ui.export import export
from reconciler.ui.pages import ROUTES
from reconciler.ui.server import UiServer
from reconciler.ui.state import UiState
from tests.ui.conftest import Pages, screenshot
from tests.ui.looked import look, reconciled
from tests.ui.results_support import small

TOKEN = "a-token-for-the-test"


@pytest.fixture(scope="module")
def looked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UiState]:
    """chat-8b running on the local fleet, looked at once; every tenth result of this
    repository for the explorer (a quicker page, the same ranking code)."""
    with reconciled(tmp_path_factory) as (repo, _):
        state = look(repo.path, repo.cache)
    state.repo = small(10)
    yield state


@pytest.fixture(scope="module")
def url(looked: UiState) -> Iterator[str]:
    server = UiServer(looked, ROUTES, "127.0.0.1:0", None)
    try:
        yield server.start()
    finally:
        server.stop()


def ranked(page: Page) -> list[str]:
    return page.locator('table.ranking[data-part="ranked"] tr[data-result]').evaluate_all(
        "rows => rows.map(row => row.dataset.result)"
    )


def test_the_explorers_filters_change_the_ranking_and_the_address(url: str, page: Page) -> None:
    page.goto(url + "results")
    by_cost = ranked(page)
    assert len(by_cost) > 10
    page.select_option("#f-rank", "throughput")
    page.fill("#f-model", "llama-3.1-8b")
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r"rank=throughput"))
    assert "model=llama-3.1-8b" in page.url
    by_throughput = ranked(page)
    assert by_throughput and by_throughput != by_cost
    assert all(r in by_cost for r in by_throughput)  # a filter narrows: the same results
    figures = page.locator('table.ranking[data-part="ranked"] tr[data-result]').evaluate_all(
        "rows => rows.map(row => row.cells[6].innerText)"
    )  # tok/s/GPU, ranked by it: falling
    values = [float(f.replace(",", "")) for f in figures if f != "…"]
    assert values == sorted(values, reverse=True)
    screenshot(page, "results")
    # the address is the view: opened anew, it shows the same ranking
    shared = page.url
    again = page.context.new_page()
    again.goto(shared)
    assert ranked(again) == by_throughput
    expect(again.locator("#f-rank")).to_have_value("throughput")


def test_a_bad_latency_target_says_what_the_cli_says(url: str, page: Page) -> None:
    answer = page.goto(url + "results?latency=p99%3Cabc")
    assert answer is not None and answer.status == 400
    expect(page.locator("#filter-error")).to_contain_text("abc")


def test_a_pareto_point_opens_its_result(url: str, page: Page) -> None:
    page.goto(url + "results?rank=throughput")
    point = page.locator("svg.pareto a.point[data-frontier]").first
    result = point.get_attribute("data-result")
    assert result
    point.click()
    page.wait_for_url(re.compile(re.escape(f"/results/{result}")))
    expect(page.locator("h1")).to_contain_text(result)
    expect(page.locator("main")).to_contain_text("HBM")  # the roofline's decode share
    screenshot(page, "result")


def test_the_export_opens_from_a_file_with_the_same_ranking(
    url: str, looked: UiState, pages: Pages, tmp_path: Path
) -> None:
    export(looked, ROUTES, tmp_path / "site")
    served, exported = pages(), pages()
    served.goto(url + "results?workload=agent&rank=throughput")
    exported.goto((tmp_path / "site" / "index.html").as_uri())
    expect(exported.locator("tr[data-key]").first).to_be_visible()
    exported.click("nav >> text=Results")
    assert exported.url.startswith("file://")
    # the export's selects go to the page of that view
    exported.select_option("#f-workload", "agent")
    exported.wait_for_url(re.compile(r"workload-agent"))
    exported.select_option("#f-rank", "throughput")
    exported.wait_for_url(re.compile(r"results--rank-throughput--workload-agent\.html$"))
    assert ranked(exported) == ranked(served) and ranked(served)
    screenshot(exported, "export-results")


def test_with_a_token_a_request_without_it_is_refused(looked: UiState, page: Page) -> None:
    server = UiServer(looked, ROUTES, "127.0.0.1:0", TOKEN)
    try:
        base = server.start()
        answer = page.goto(base)
        assert answer is not None and answer.status == 401
        expect(page.locator("body")).to_contain_text("needs its token")
        answer = page.goto(base + "?token=" + TOKEN)  # once: then the cookie carries it
        assert answer is not None and answer.status == 200
        assert page.url == base  # the token left the address
        page.click("nav >> text=Fleets")
        expect(page.locator("h1")).to_have_text("Fleets")
    finally:
        server.stop()


@pytest.mark.parametrize(
    ("name", "path"),
    [
        ("overview", ""),
        ("release", "releases/chat-8b"),
        ("fleets", "fleets"),
        ("optimize", "optimize"),
        ("compare", "compare"),
    ],
)
def test_every_page_renders_without_a_script_error(
    url: str, pages: Pages, name: str, path: str
) -> None:
    for phone in (False, True):
        page = pages(phone=phone)
        answer = page.goto(url + path)
        assert answer is not None and answer.status == 200
        expect(page.locator("main h1")).to_be_visible()
        size = page.viewport_size
        assert size is not None
        assert page.evaluate("document.documentElement.scrollWidth") <= size["width"]
        if name == "overview":  # every row's state is on the screen, not in a scrolled box
            for box in page.locator("td.state").evaluate_all(
                "cells => cells.map(c => c.getBoundingClientRect().right)"
            ):
                assert box <= size["width"]
        screenshot(page, f"{name}-phone" if phone else name)
