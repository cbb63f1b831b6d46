"""benchmarks/scale_up.py end to end at one repeat: the bot scales 1 → 2 under a burst by
itself, then the script adds the same replica; both times are measured. No assertion on the
ratio: it is a measurement."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent


def test_one_repeat_measures_the_bot_and_the_script() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, str(ROOT / "benchmarks/scale_up.py"), "--repeats", "1", "--json"]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=400)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert set(out) == {
        "bot_s",
        "script_s",
        "ratio",
        "repeats",
        "from",
        "bot",
        "script",
        "load_before",
        "load_after",
    }
    assert out["repeats"] == 1 and out["from"] == 1 and len(out["bot"]) == len(out["script"]) == 1
    assert out["bot_s"] > 0 and out["script_s"] > 0 and out["ratio"] > 0
    # the bot decided 1 → 2 by itself and the router served the new replica (else no figure)
    assert "bot " in done.stderr and "script " in done.stderr
