"""Fixtures for the UI's browser tests: Debian's Chromium (or `$DENV_CHROMIUM`) driven headless
by Playwright's sync API, one browser per test module and a fresh context (cookies, storage) per
page; screenshots go to tests/ui/screenshots/ (git ignores it) or `$DENV_SCREENSHOTS`.

The sync API runs its own event loop: these tests must not run inside one (no asyncio test), and
while a module's browser is open its loop counts as this thread's running loop."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, ViewportSize, sync_playwright

from tests.conftest import ROOT, require_installed
from tests.e2e.bot import bot_env
from tests.reconcile.conftest import GitRepo, git_repo
from tests.ui.denv import Denv

__all__ = ["git_repo"]

DESKTOP = ViewportSize(width=1280, height=800)
PHONE = ViewportSize(width=390, height=844)  # a common phone's CSS pixels


def chromium() -> Path:
    return Path(os.environ.get("DENV_CHROMIUM") or "/usr/bin/chromium")


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    executable = chromium()
    require_installed(os.access(executable, os.X_OK), f"Chromium ({executable})")
    with sync_playwright() as playwright:
        # --no-sandbox: Chromium's sandbox needs user namespaces, which containers (CI) lack
        found = playwright.chromium.launch(
            executable_path=str(executable), headless=True, args=["--no-sandbox"]
        )
        try:
            yield found
        finally:
            found.close()


class Pages:
    """`pages(phone=False)`: a page in a context of its own, a desktop's or a phone's
    (viewport, touch). The script errors of every page are kept in `errors`."""

    def __init__(self, browser: Browser) -> None:
        self.browser = browser
        self.contexts: list[BrowserContext] = []
        self.errors: list[str] = []

    def __call__(self, phone: bool = False) -> Page:
        if phone:
            context = self.browser.new_context(viewport=PHONE, is_mobile=True, has_touch=True)
        else:
            context = self.browser.new_context(viewport=DESKTOP)
        self.contexts.append(context)
        page = context.new_page()
        page.on("pageerror", lambda error: self.errors.append(f"{page.url}: {error}"))
        return page


@pytest.fixture
def pages(browser: Browser) -> Iterator[Pages]:
    """New pages; a script error on any of them fails the test."""
    found = Pages(browser)
    yield found
    for context in found.contexts:
        context.close()
    assert found.errors == [], "script errors in the page"


@pytest.fixture
def page(pages: Pages) -> Page:
    return pages()


@pytest.fixture
def denv(git_repo: GitRepo, tmp_path: Path) -> Iterator[Denv]:
    """`denv` processes on a repository of this one's denv files, the local forge's; all
    stopped at the end, with the units they started."""
    found = Denv(git_repo, bot_env(tmp_path / "cache") | {"DENV_FORGE": "local"}, tmp_path)
    yield found
    found.stop()


def screenshot(page: Page, name: str) -> Path:
    """The whole page as `name`.png in the screenshots folder (kept for people to look at)."""
    folder = Path(os.environ.get("DENV_SCREENSHOTS") or ROOT / "tests" / "ui" / "screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path
