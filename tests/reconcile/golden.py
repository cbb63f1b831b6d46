"""Text golden files (the house rule of tests/engines/golden.py, for text): compared verbatim;
DENV_UPDATE_GOLDEN=1 rewrites them instead."""

from __future__ import annotations

import os
from pathlib import Path

GOLDEN = Path(__file__).resolve().parent / "golden"


def check_text(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("DENV_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return
    assert path.exists(), f"{path} is missing; run the tests with DENV_UPDATE_GOLDEN=1"
    assert path.read_text() == text, f"{path} differs; DENV_UPDATE_GOLDEN=1 rewrites it"
