"""The browser fixtures themselves: a page from a string, a phone's viewport, a screenshot, and a
script error that fails the test."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests.ui.conftest import PHONE, Pages, screenshot

PAGE = """<!doctype html><html lang="en"><title>denv</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<main><table><tr data-key="chat-8b/canary/local"><td class="state">deploying</td></tr></table>
</main>
<script>document.querySelector("td.state").textContent = "baking 2s/3s";</script></html>"""


def test_a_page_from_a_string_runs_its_script(page: Page) -> None:
    page.set_content(PAGE)
    expect(page.locator('tr[data-key="chat-8b/canary/local"] td.state')).to_have_text(
        "baking 2s/3s"
    )


def test_a_phone_page_has_a_phone_viewport(pages: Pages) -> None:
    # as on a phone, a page without `<meta name="viewport">` would be laid out 980px wide
    phone = pages(phone=True)
    phone.set_content(PAGE)
    assert phone.evaluate("[window.innerWidth, navigator.maxTouchPoints > 0]") == [
        PHONE["width"],
        True,
    ]


def test_a_screenshot_is_a_png_in_the_folder_asked_for(
    page: Page, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DENV_SCREENSHOTS", str(tmp_path / "shots"))
    page.set_content(PAGE)
    path = screenshot(page, "fixture")
    assert path == tmp_path / "shots" / "fixture.png"
    assert path.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


def test_a_script_error_is_kept(pages: Pages) -> None:
    page = pages()
    page.set_content("<script>undefinedFunction()</script>")
    assert len(pages.errors) == 1 and "undefinedFunction" in pages.errors[0]
    pages.errors.clear()  # else the fixture fails the test, as it does every other's
