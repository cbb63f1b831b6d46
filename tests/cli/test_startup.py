"""Start-up: `denv --help` loads no command module, and `denv bench` (the ranking) none of the
libraries only other commands need — checked on what a fresh interpreter has imported, so a
heavy import creeping back fails here (the times: benchmarks/startup.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from reconciler.cli import COMMANDS, SUMMARIES, command_given
from tests.conftest import ROOT

IMPORTED = """
import json, sys
sys.argv = ["denv", *sys.argv[1:]]
from reconciler.cli import main
try:
    main()
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
"""
# libraries of one command or one adapter each: optimizer, ssh, http, git, plots, forge
ADAPTERS = (
    "aiohttp",
    "fabric",
    "paramiko",
    "optuna",
    "sqlalchemy",
    "matplotlib",
    "numpy",
    "github",
    "jinja2",
    "prometheus_client",
    "pygit2",  # a commit's files; a work tree needs no git
)
HEAVY_FOR_HELP = (
    *ADAPTERS,
    "pydantic",
    "ruamel",
    "pygit2",
    "rich",
    "reconciler.spec",
    "reconciler.bench",
)


def imported(*argv: str, env: dict[str, str] | None = None) -> set[str]:
    run = subprocess.run(
        [sys.executable, "-c", IMPORTED, *argv], capture_output=True, text=True, cwd=ROOT, env=env
    )
    return set(json.loads(run.stderr.strip().splitlines()[-1]))


def loaded(modules: set[str], names: tuple[str, ...]) -> list[str]:
    return sorted(n for n in names if n in modules or any(m.startswith(n + ".") for m in modules))


def test_help_imports_no_command_and_no_heavy_library() -> None:
    modules = imported("--help")
    assert loaded(modules, HEAVY_FOR_HELP) == []
    assert sorted(m for m in modules if m.startswith("reconciler.")) == [
        "reconciler.cli",
        "reconciler.cli.streams",  # the terminal boundary: no library
        "reconciler.errors",
        "reconciler.shown",
    ]


@pytest.mark.parametrize("argv", [("bench", "--help"), ("validate", "--help")], ids=" ".join)
def test_bench_and_validate_import_no_adapter_library(argv: tuple[str, ...]) -> None:
    assert loaded(imported(*argv), ADAPTERS) == []


def test_the_bot_loads_no_http_client_until_a_parity_check_runs() -> None:
    """`denv reconcile` starts without aiohttp (a `--once` pays for every import before it
    starts a replica): the deploy-time parity check imports it when it runs."""
    modules = imported("reconcile", "--help")
    assert "reconciler.cli.reconcile" in modules
    assert loaded(modules, ("aiohttp", "tenacity")) == []


@pytest.mark.parametrize(
    "argv",
    [("status",), ("candidates", "chat-8b/canary"), ("stop", "chat-8b/canary")],
    ids=lambda argv: argv[0],
)
def test_the_optimizers_read_only_commands_import_no_run_library(
    argv: tuple[str, ...], tmp_path: Path
) -> None:
    """`optimize status`, `candidates` and `stop` read the study's state file: not optuna,
    SQLAlchemy, the fleet drivers or the load generator (they took 2.5-7 s on a busy machine)."""
    env = {**os.environ, "DENV_OPTIMIZE_HOME": str(tmp_path)}
    modules = imported("optimize", *argv, env=env)
    assert "reconciler.cli.optimize" in modules
    assert loaded(modules, tuple(a for a in ADAPTERS if a != "pygit2")) == []
    assert (
        loaded(
            modules,
            (
                "reconciler.optimize.runner",
                "reconciler.optimize.measuring",
                "reconciler.fleet.drivers",
            ),
        )
        == []
    )


def test_ranking_imports_no_engine_and_builds_no_unread_model(tmp_path: Path) -> None:
    """`denv bench` reads only the catalog and results: the engines' flag tables are not
    imported, and the spec models of files it does not read (fleets, releases) are defined
    but never built (pydantic's deferred build)."""
    probe = IMPORTED.replace(
        "print(json.dumps(sorted(sys.modules)), file=sys.stderr)",
        "from reconciler.spec.fleet import Fleet\n"
        "from reconciler.spec.release import Release\n"
        "print(json.dumps(sorted(sys.modules) + [f'built:{m.__name__}' for m in (Fleet, Release)"
        " if m.__pydantic_complete__]), file=sys.stderr)",
    )
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path), "DENV_CACHE": str(tmp_path / "c")}
    run = subprocess.run(
        [sys.executable, "-c", probe, "bench"], capture_output=True, text=True, cwd=ROOT, env=env
    )
    modules = set(json.loads(run.stderr.strip().splitlines()[-1]))
    assert sorted(m for m in modules if m.startswith("reconciler.engines")) == [
        "reconciler.engines",
        "reconciler.engines.model",
        "reconciler.engines.model.calibration",  # the hardware's generation, for the intervals
        "reconciler.engines.model.error_intervals",
        "reconciler.engines.model.stats",
    ]
    assert not {m for m in modules if m.startswith("built:")}


def test_help_lists_every_command_by_its_summary() -> None:
    assert list(SUMMARIES) == list(COMMANDS)
    run = subprocess.run(
        [sys.executable, "-m", "reconciler", "--help"], capture_output=True, text=True, cwd=ROOT
    )
    assert run.returncode == 0, run.stderr
    for name in COMMANDS:
        assert f" {name} " in run.stdout


@pytest.mark.parametrize(
    ("argv", "command"),
    [
        (["denv"], None),
        (["denv", "--help"], None),
        (["denv", "bench", "--workload", "agent"], "bench"),
        (["denv", "--some-flag", "validate"], "validate"),
        (["denv", "nope"], None),
    ],
    ids=["none", "help", "bench", "after-an-option", "unknown"],
)
def test_the_command_given_is_the_first_word(argv: list[str], command: str | None) -> None:
    assert command_given(argv) == command
