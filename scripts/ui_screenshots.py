"""The UI's screenshots in README.md and docs/ui.md (docs/img/), taken from a running `denv ui`:
the demo's, after its canary rolled back (scripts/demo_stages.sh calls this when
`DENV_SCREENSHOTS` names a folder; `make screenshots` runs that part of the demo for it).

    python scripts/ui_screenshots.py URL FOLDER

Chromium headless through Playwright (`$DENV_CHROMIUM`, default /usr/bin/chromium). Each page
is waited on until it shows the state the picture is of; a page whose text shows a
temporary folder (the demo's throwaway clone, a test's tmp path) is refused, exit 1: the
pictures are of the UI, not of where it happened to run."""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from playwright.sync_api import Browser, ViewportSize, sync_playwright

VIEWPORT = ViewportSize(width=1280, height=800)
# /tmp/…, a pytest tmp folder, the demo's mktemp folders
TEMP = re.compile(r"(/tmp/|/var/folders/|pytest-\d|pytest-of-|denv-(demo|stages)\.\w{6})")


@dataclass(frozen=True)
class Shot:
    file: str  # in the folder: README.md and docs/ui.md name it
    path: str  # the page, relative to the UI's address
    selector: str  # the element that says the state the picture is of
    shows: str  # what its text starts with


SHOTS = (
    Shot("ui-overview.png", "", 'tr[data-key="chat-8b/canary/local"] .badge', "rolled back"),
    Shot(
        "ui-release.png", "releases/chat-8b", '[data-stage="chat-8b/canary"] .badge', "rolled back"
    ),
)


def temp_paths(text: str) -> list[str]:
    """The lines of a page's text that name a temporary folder."""
    return [line.strip() for line in text.splitlines() if TEMP.search(line)]


def take(browser: Browser, url: str, shot: Shot, folder: Path, timeout: float = 60) -> str:
    """`shot` of the UI at `url` into `folder`, once its page shows `shot.shows`; the page's
    text. Refused (ValueError) where that text names a temporary folder."""
    context = browser.new_context(viewport=VIEWPORT)
    try:
        page = context.new_page()
        page.goto(url.rstrip("/") + "/" + shot.path)
        page.wait_for_function(  # the page refreshes itself in place
            "([selector, shows]) => { const found = document.querySelector(selector); "
            "return found && found.textContent.trim().startsWith(shows); }",
            arg=[shot.selector, shot.shows],
            timeout=timeout * 1000,
        )
        text = page.inner_text("body")
        if found := temp_paths(text):
            raise ValueError(f"{shot.file}: the page names a temporary folder: {found[0]}")
        folder.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(folder / shot.file), full_page=True)
        return text
    finally:
        context.close()


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: ui_screenshots.py URL FOLDER", file=sys.stderr)
        return 2
    url, folder = argv[0], Path(argv[1])
    chromium = os.environ.get("DENV_CHROMIUM") or "/usr/bin/chromium"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=chromium, headless=True, args=["--no-sandbox"]
        )
        try:
            for shot in SHOTS:
                take(browser, url, shot, folder)
                print(f"screenshot: {folder / shot.file}", flush=True)
        except ValueError as exc:
            print(f"ui_screenshots: {exc}", file=sys.stderr)
            return 1
        finally:
            browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
