"""Golden files: compared verbatim; DENV_UPDATE_GOLDEN=1 rewrites them instead."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def check_text(path: Path, text: str) -> None:
    """`text` is the file at `path`, verbatim (DENV_UPDATE_GOLDEN=1 writes it there)."""
    if os.environ.get("DENV_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return
    assert path.exists(), f"{path} is missing; run the tests with DENV_UPDATE_GOLDEN=1"
    assert path.read_text() == text, f"{path} differs; DENV_UPDATE_GOLDEN=1 rewrites it"


def check_json(path: Path, data: Any) -> None:
    """`data` as indented JSON is the file at `path`."""
    check_text(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")
