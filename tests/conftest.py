"""Fixtures shared by every test package."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DENV_DIRS = ("catalog", "recipes", "fleets", "releases", "policies")
# the local fleets' leases, kept per machine: this process's own (each test gets its own, below;
# a lab a module starts before its first test uses this one)
os.environ.setdefault("DENV_MACHINE_DIR", tempfile.mkdtemp(prefix="denv-machine-"))
# the GPUs' claims (one engine per GPU, whatever the user): likewise
os.environ.setdefault("DENV_GPU_CLAIMS", tempfile.mkdtemp(prefix="denv-gpus-"))


def require_installed(present: bool, what: str, target: str = "system-deps") -> None:
    """Skip a test whose real program is missing, except in CI: `make <target>` installs
    it there, and no test may skip for a missing service."""
    if present:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"{what} is missing: `make {target}` installs it")
    pytest.skip(f"{what} is not installed (`make {target}` installs it)")


Edit = Callable[[str, str, str], None]


@pytest.fixture(autouse=True)
def _state_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """What denv keeps per user (`denv status`'s unreachable hosts, the last bench ranking)
    and per machine (the local fleets' leases) goes to a folder of the test's, never the home
    of whoever runs the tests nor this machine's."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("state")))
    # this machine's leases of local fleets (kept whatever DENV_HOME): each test's own
    monkeypatch.setenv("DENV_MACHINE_DIR", str(tmp_path_factory.mktemp("machine")))
    monkeypatch.setenv("DENV_GPU_CLAIMS", str(tmp_path_factory.mktemp("gpus")))


@pytest.fixture
def denv_repo(tmp_path: Path) -> Path:
    """A copy of this repository's denv files (results left out: they are large)."""
    from tests.labs.workspace import copy_denv_files  # it imports this module

    return copy_denv_files(tmp_path)


@pytest.fixture
def edit(denv_repo: Path) -> Edit:
    """Replace exactly one occurrence of `old` in a file of the repo copy."""

    def _edit(path: str, old: str, new: str) -> None:
        file = denv_repo / path
        text = file.read_text()
        assert text.count(old) == 1, f"{path}: expected one '{old}'"
        file.write_text(text.replace(old, new))

    return _edit


# The longest test files (minutes each: engines over sshd; the guides' file walks
# docs/optimize.md on a busy machine, tests/labs/busy.py), collected first so that under
# `pytest -n 2 --dist loadfile --no-loadscope-reorder` they start first and the two workers
# finish together (by default xdist orders files by their number of tests instead).
LONGEST_FIRST = (
    "tests/e2e/test_guides.py",
    "tests/e2e/test_reconcile.py",
    "tests/e2e/test_rollout.py",
    "tests/e2e/test_optimize.py",
    "tests/e2e/test_elastic.py",
    "tests/slurm/test_reconcile.py",
    "tests/parity/test_targets.py",
    "tests/slurm/test_trials.py",
    "tests/e2e/test_deploy_parity.py",
    "tests/security/test_inputs.py",
    "tests/e2e/test_bench_run.py",
    "tests/e2e/test_trial_reclaim.py",
    "tests/e2e/test_pr_walkthrough.py",
    "tests/ui/test_live_overview.py",
    "tests/ui/test_browser_pages.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        path = item.nodeid.split("::", 1)[0]
        return LONGEST_FIRST.index(path) if path in LONGEST_FIRST else len(LONGEST_FIRST)

    items.sort(key=rank)  # stable: the order within a file and among the rest is kept
