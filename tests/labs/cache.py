"""What a clean clone would otherwise build or fetch again on every run (the real engine's
venv, GitHub's published schemas) is kept once per machine: in $DENV_TEST_CACHE, else
$XDG_CACHE_HOME/denv-tests, else ~/.cache/denv-tests (the Makefile passes the same folder).
Each thing in it lies under a name made of what determines its content."""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path


def machine_cache() -> Path:
    named = os.environ.get("DENV_TEST_CACHE")
    if named:
        return Path(named)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "denv-tests"


def interpreter_key() -> str:
    """This Python's version and installation: what a venv built from it depends on."""
    where = hashlib.sha256(os.path.realpath(sys.base_prefix).encode()).hexdigest()[:8]
    return f"{sys.implementation.cache_tag}-{where}"
