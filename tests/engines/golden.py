"""Golden files: compared verbatim; DENV_UPDATE_GOLDEN=1 rewrites them instead."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

GOLDEN = Path(__file__).resolve().parent / "golden"


def check_golden(name: str, data: Any) -> None:
    path = GOLDEN / name
    text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    if os.environ.get("DENV_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return
    assert path.exists(), f"{path} is missing; run the tests with DENV_UPDATE_GOLDEN=1"
    assert path.read_text() == text, f"{path} differs; DENV_UPDATE_GOLDEN=1 rewrites it"
