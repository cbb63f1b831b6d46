"""The engines' golden files (rendered units as JSON), checked by tests/labs/golden.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.labs.golden import check_json

GOLDEN = Path(__file__).resolve().parent / "golden"


def check_golden(name: str, data: Any) -> None:
    check_json(GOLDEN / name, data)
