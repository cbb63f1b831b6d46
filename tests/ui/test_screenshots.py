"""The UI's pictures in the docs (scripts/ui_screenshots.py): the images README.md and the docs
show exist, and the generator takes a page only when its text names no temporary folder — run
here against a real server over a repository in a pytest tmp folder."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser

from reconciler.ui.pages import ROUTES
from reconciler.ui.server import UiServer
from scripts.ui_screenshots import SHOTS, Shot, take, temp_paths
from tests.conftest import ROOT
from tests.reconcile.conftest import GitRepo, git_repo
from tests.ui.looked import look

__all__ = ["git_repo"]

IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]+\.(?:png|svg|jpe?g|gif))\)")


def test_every_image_the_docs_show_exists() -> None:
    shown = []
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for target in IMAGE.findall(doc.read_text()):
            if "://" not in target:
                shown.append((doc.relative_to(ROOT), (doc.parent / target).resolve()))
    missing = [f"{doc}: {path.relative_to(ROOT)}" for doc, path in shown if not path.is_file()]
    assert shown and missing == []
    # the generator's pictures are the ones the docs show
    pictures = {path.name for _, path in shown if path.parent == ROOT / "docs" / "img"}
    assert {shot.file for shot in SHOTS} <= pictures


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("denv at 1f0cb6bd1e42", []),
        ("/tmp/denv-demo.Ab12Cd/denv at 1f0c", ["/tmp/denv-demo.Ab12Cd/denv at 1f0c"]),
        (
            "x\n/home/u/pytest-of-u/pytest-3/repo0 at 1f0c",
            ["/home/u/pytest-of-u/pytest-3/repo0 at 1f0c"],
        ),
        ("denv-stages.x1Y2z3", ["denv-stages.x1Y2z3"]),
    ],
    ids=["clean", "demo-clone", "pytest-tmp", "stages-work"],
)
def test_temporary_folders_are_found_in_a_pages_text(text: str, found: list[str]) -> None:
    assert temp_paths(text) == found


@pytest.fixture
def served(git_repo: GitRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """`denv ui` over a repository in a pytest tmp folder, after one look."""
    monkeypatch.setenv("DENV_HOME", str(tmp_path / "home"))
    state = look(git_repo.path, git_repo.cache)
    server = UiServer(state, ROUTES, "127.0.0.1:0", None)
    try:
        yield server.start()
    finally:
        server.stop()


def test_the_generator_pictures_pages_that_name_no_temporary_folder(
    browser: Browser, served: str, git_repo: GitRepo, tmp_path: Path
) -> None:
    overview = Shot("overview.png", "", 'tr[data-key="chat-8b/canary/local"] .badge', "waiting")
    text = take(browser, served, overview, tmp_path / "shots", timeout=30)
    assert (tmp_path / "shots" / "overview.png").stat().st_size > 0
    assert str(git_repo.path) not in text and "chat-8b" in text
    assert temp_paths(text) == []
