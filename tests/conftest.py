"""Fixtures shared by every test package."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DENV_DIRS = ("catalog", "recipes", "fleets", "releases", "policies")

Edit = Callable[[str, str, str], None]


@pytest.fixture
def denv_repo(tmp_path: Path) -> Path:
    """A copy of this repository's denv files (results left out: they are large)."""
    for name in DENV_DIRS:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, tmp_path / name)
    return tmp_path


@pytest.fixture
def edit(denv_repo: Path) -> Edit:
    """Replace exactly one occurrence of `old` in a file of the repo copy."""

    def _edit(path: str, old: str, new: str) -> None:
        file = denv_repo / path
        text = file.read_text()
        assert text.count(old) == 1, f"{path}: expected one '{old}'"
        file.write_text(text.replace(old, new))

    return _edit
