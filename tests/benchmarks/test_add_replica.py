"""benchmarks/add_replica.py runs both sides for real: the bot adds the replica and the
script adds it again, each ending with the router listing it, and it leaves nothing behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent


def test_one_repeat_measures_the_bot_and_the_script_adding_a_replica() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("DENV_HOME", None)
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks/add_replica.py"),
            "--replicas",
            "1",
            "--repeats",
            "1",
            "--json",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    [point] = json.loads(done.stdout)
    assert point["replicas"] == 1 and point["repeats"] == 1
    [[bot, script]] = point["pairs"]
    assert bot > 0 and script > 0
    assert (point["bot_s"], point["script_s"]) == (bot, script)
    # the bot's apply is part of its whole --once, never more
    assert bot < point["once_s"]
    assert "repeat 1/1: bot" in done.stderr
