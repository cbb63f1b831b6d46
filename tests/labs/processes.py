"""Stopping what a lab started: SIGTERM, time to finish, then SIGKILL."""

from __future__ import annotations

import subprocess
from typing import Any


def stop_process(process: subprocess.Popen[Any], grace: float = 10) -> None:
    """SIGTERM `process` (if still running) and wait `grace` seconds; SIGKILL it if it is not
    gone by then. Returns once it has exited."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
