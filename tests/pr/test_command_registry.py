"""`/denv` commands are dispatched from one registry, `reconciler.pr.commands.COMMANDS`: a
command registered there from outside the package runs when a pull request's comment names
it; a name the registry lacks is refused in the bot's reply and runs nothing (never plan or
bench in its stead)."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.fleet.drivers.registry import Drivers
from reconciler.forge.handled import read_handled
from reconciler.forge.local import LocalForge
from reconciler.pr import commands
from reconciler.pr.bench import BenchOptions
from reconciler.pr.commands import run_commands
from tests.conftest import ROOT
from tests.pr.hello_command import HELLO
from tests.pr.test_commands import _plan_pr


def _run(repo: Path, number: int, cache: Path) -> commands.CommandsRun:
    drivers = Drivers()
    try:
        return run_commands(LocalForge(repo), repo, number, drivers, BenchOptions(), cache=cache)
    finally:
        drivers.close()


def test_a_command_registered_from_outside_runs_when_commented(
    git_repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(commands.COMMANDS, "hello", HELLO)
    number, head = _plan_pr(git_repo)
    forge = LocalForge(git_repo)
    asked = forge.comment(number, "/denv hello", author="grace").id

    result = _run(git_repo, number, tmp_path / "cache")

    [ran] = result.ran
    assert (ran.comment_id, ran.command) == (asked, "hello")
    assert ran.outcome == "check 'denv hello' success: hello, #1"
    assert [c.name for c in forge.checks(head)] == ["denv hello"]  # no plan, no bench
    assert read_handled(forge.own_comments(number)) == [ran]


def test_an_unknown_command_is_refused_and_runs_nothing(git_repo: Path, tmp_path: Path) -> None:
    number, head = _plan_pr(git_repo)
    forge = LocalForge(git_repo)
    asked = forge.comment(number, "/denv hello", author="grace").id

    result = _run(git_repo, number, tmp_path / "cache")

    [ran] = result.ran
    assert ran.comment_id == asked
    assert ran.outcome == (
        "refused: denv has no command `hello`; it understands `/denv plan`, `/denv bench`"
    )
    assert result.checks == [] and forge.checks(head) == []  # nothing planned or benched
    [reply] = forge.own_comments(number)  # the bot's commands comment says so
    assert "denv has no command `hello`" in reply.body
    assert read_handled([reply]) == [ran]  # and it is never taken up again
    assert _run(git_repo, number, tmp_path / "cache").ran == []


def test_docs_list_every_command_with_its_help() -> None:
    listed = (ROOT / "docs" / "github.md").read_text()
    for name, command in commands.COMMANDS.items():
        assert f"| `/denv {name}` | {command.help} |" in listed, name
