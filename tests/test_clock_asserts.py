"""scripts/clock_asserts.py, the lint check that keeps elapsed-time assertions out of the
parallel phase: what it finds in small modules written here, and that the suite has none."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent


def checker() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "clock_asserts", ROOT / "scripts/clock_asserts.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


HEAD = "import asyncio, statistics, time\nimport pytest\n\n"
FOUND = {
    "direct": "def test_x():\n    started = time.monotonic()\n    work()\n"
    "    assert time.monotonic() - started < 10\n",
    "through a name": "def test_x():\n    t0 = time.perf_counter()\n    t1 = time.perf_counter()\n"
    "    took = t1 - t0\n    assert took < 1\n",
    "a helper that times": "def gaps():\n    now = time.monotonic()\n    return [now - 1]\n\n"
    "def test_x():\n    spiked = asyncio.run(gaps())\n"
    "    assert statistics.median(spiked) == pytest.approx(0.02)\n",
}
LEFT = {
    "a clock given to a call": "def test_x():\n    reading = watch(time.time())\n"
    "    assert reading.requests >= 10\n",
    "a serial test": "@pytest.mark.serial\ndef test_x():\n    t0 = time.time()\n"
    "    assert time.time() - t0 < 5\n",
    "a serial module": "pytestmark = pytest.mark.serial\n\ndef test_x():\n    t0 = time.time()\n"
    "    assert time.time() - t0 < 5\n",
    "excused": "def test_x():\n    t0 = time.time()\n"
    "    assert time.time() - t0 >= 0  # clock-ok: both bounds are readings\n",
    "a wait with a deadline": "def test_x():\n    deadline = time.monotonic() + 5\n"
    "    while time.monotonic() < deadline:\n        pass\n    assert done()\n",
}


@pytest.mark.parametrize("case", FOUND)
def test_an_elapsed_time_assertion_is_found(case: str, tmp_path: Path) -> None:
    path = tmp_path / "test_case.py"
    path.write_text(HEAD + FOUND[case])
    [found] = checker().findings(path)
    assert found.startswith(f"{path}:") and ": test_x: " in found


@pytest.mark.parametrize("case", LEFT)
def test_what_is_not_an_elapsed_time_assertion_is_left(case: str, tmp_path: Path) -> None:
    path = tmp_path / "test_case.py"
    path.write_text(HEAD + LEFT[case])
    assert list(checker().findings(path)) == []


def test_the_suite_has_none_and_a_finding_fails_the_check(tmp_path: Path) -> None:
    script = str(ROOT / "scripts/clock_asserts.py")
    clean = subprocess.run([sys.executable, script, str(ROOT / "tests")], capture_output=True)
    assert clean.returncode == 0, clean.stdout.decode()
    (tmp_path / "test_case.py").write_text(HEAD + FOUND["direct"])
    found = subprocess.run([sys.executable, script, str(tmp_path)], capture_output=True, text=True)
    assert found.returncode == 1 and "1 assertion(s) on elapsed time" in found.stderr
