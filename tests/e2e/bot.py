"""`denv` as the end-to-end tests run it: a subprocess on a test repository, its cache and its
agent's home beside the test's (never ~/.denv), optionally killed at a step boundary."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path


def bot_env(cache: Path, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """`base` (default: this process's environment) with the test's cache and agent home."""
    env = {**(base if base is not None else os.environ)}
    env |= {"DENV_CACHE": str(cache), "DENV_HOME": str(cache / "home")}
    env.pop("DENV_REPO", None)
    return env


def run_denv(
    repo: Path, env: Mapping[str, str], *args: str, fault: str | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """`denv ARGS --repo REPO`; with `fault`, the process SIGKILLs itself at that step."""
    return subprocess.run(
        [sys.executable, "-m", "reconciler", *args, "--repo", str(repo)],
        capture_output=True,
        text=True,
        env={**env, **({"DENV_FAULT_KILL_AT": fault} if fault else {})},
        timeout=timeout,
    )
