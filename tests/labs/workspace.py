"""A workspace as a test's repository starts: this project's denv files (catalog, recipes,
fleets, releases, policies; the results left out: they are large) copied into a folder."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.conftest import DENV_DIRS, ROOT


def copy_denv_files(folder: Path) -> Path:
    """This repository's denv folders under `folder` (made if missing); `folder`."""
    for name in DENV_DIRS:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, folder / name)
    return folder
