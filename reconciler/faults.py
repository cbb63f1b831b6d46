"""Test hooks at the boundaries of the bot's steps: `DENV_FAULT_KILL_AT=STEP` has the process
SIGKILL itself there (a crash at the worst moment, for the fault tests and
benchmarks/chaos.py); `DENV_FAULT_PAUSE_AT=STEP:FILE` creates FILE there and waits while it
exists (up to 2 minutes). Unset, each is one look at the environment."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

FAULT_ENV = "DENV_FAULT_KILL_AT"
PAUSE_ENV = "DENV_FAULT_PAUSE_AT"


def fault_point(name: str) -> None:
    if os.environ.get(FAULT_ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)
    step, _, marker = os.environ.get(PAUSE_ENV, "").partition(":")
    if step == name and marker:
        Path(marker).touch()
        deadline = time.monotonic() + 120
        while Path(marker).exists() and time.monotonic() < deadline:
            time.sleep(0.05)
