"""cli/progress.py: the one progress sink — plain lines with the elapsed time where stderr is
not a terminal (CI logs), bars on a terminal, the same finished-task lines either way."""

from __future__ import annotations

import io
import re
import subprocess
import sys
from pathlib import Path

from rich.console import Console

from reconciler.cli.progress import ProgressSink
from tests.conftest import ROOT
from tests.parity.scripted import serving, write_suite
from tests.parity.test_runner import servers


class Ticks:
    """A clock the test moves."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def sink(terminal: bool, **options: object) -> tuple[ProgressSink, io.StringIO, Ticks]:
    out = io.StringIO()
    clock = Ticks()
    console = Console(file=out, force_terminal=terminal, width=120)
    return ProgressSink(console, clock=clock, **options), out, clock  # type: ignore[arg-type]


def test_a_log_gets_one_line_per_level_with_the_elapsed_time() -> None:
    shown, out, clock = sink(False, numbered=("level", 3), unit="requests")
    with shown:
        shown.phase("deploying on trial GPUs")
        clock.now += 5.0
        for done in range(51):
            shown.update("concurrency 1", done, 50)
            clock.now += 0.1
        shown.update("concurrency 8", 0, 64)
        clock.now += 7.1
        shown.update("concurrency 8", 64, 64)
        shown.update("concurrency 32", 0, 352)
        clock.now += 1.0
        shown.update("concurrency 32", 10, 352)  # Ctrl-C here: the level did not finish
    assert out.getvalue().splitlines() == [
        "[   0.0s] deploying on trial GPUs",
        "[  10.0s] level 1/3: concurrency 1 — 50/50 requests, 5.0 s",
        "[  17.2s] level 2/3: concurrency 8 — 64/64 requests, 7.1 s",
        "[  18.2s] level 3/3: concurrency 32 — ended at 10/352 requests, 1.0 s",
    ]


def test_a_terminal_gets_bars_and_keeps_the_same_lines() -> None:
    shown, out, clock = sink(True, unit="prompts")
    with shown:
        shown.phase("starting")
        count = shown.counter("parity")
        count(0, 4)
        clock.now += 2.5
        count(4, 4)
    text = out.getvalue()
    assert "[   2.5s] parity — 4/4 prompts, 2.5 s" in text
    assert "starting" in text  # the spinner line, not a line that stays


def test_denv_parity_run_piped_prints_progress_lines(denv_repo: Path) -> None:
    reference, candidate = servers()
    suite = write_suite(denv_repo / "three.jsonl", {"a": "same?", "b": "top-k?", "c": "far?"})
    with serving(reference.app()) as ref_url, serving(candidate.app()) as cand_url:
        run = subprocess.run(
            [
                *(sys.executable, "-m", "reconciler", "parity", "run", "--repo", str(denv_repo)),
                *("--reference", ref_url, "--candidate", cand_url, "--suite", str(suite)),
            ],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=ROOT,
        )
    assert run.returncode == 1, run.stderr  # one prompt fails: the verdict, not progress
    assert re.search(r"^\[ *\d+\.\ds\] parity — 3/3 prompts, \d+\.\d s$", run.stderr, re.M), (
        run.stderr
    )
    assert run.stdout.startswith("PARITY 2/3")  # stdout is the verdict alone


def test_a_run_stopped_early_has_its_line_when_it_ends_with_its_own_duration() -> None:
    """The optimizer's runs: the first stops early at 23 of 64 requests after 11 s; its line
    comes then, before the next run's, not when the command exits minutes later."""
    shown, out, clock = sink(False, unit="requests")
    with shown:
        shown.update("run 1 at 8.7x", 0, 64)  # the run starts
        for done in range(1, 24):
            clock.now += 0.5
            shown.update("run 1 at 8.7x", done, 64)
        shown.end("run 1 at 8.7x", "stopped early at ")
        clock.now += 2.0  # between runs
        shown.update("run 2 at 4.4x", 0, 64)
        clock.now += 6.0
        shown.update("run 2 at 4.4x", 64, 64)
        shown.end("run 2 at 4.4x", "stopped early at ")  # finished already: nothing more
        clock.now += 350.0  # a long teardown before the command exits
    assert out.getvalue().splitlines() == [
        "[  10.0s] run 1 at 8.7x — 20/64 requests so far",  # 10 s without a line
        "[  11.5s] run 1 at 8.7x — stopped early at 23/64 requests, 11.5 s",
        "[  19.5s] run 2 at 4.4x — 64/64 requests, 6.0 s",
    ]


def test_a_terminal_gets_no_so_far_lines() -> None:
    shown, out, clock = sink(True, unit="requests")
    with shown:
        shown.update("run 1 at 2x", 0, 64)
        clock.now += 30.0
        shown.update("run 1 at 2x", 10, 64)
        shown.end("run 1 at 2x")
    assert [line for line in out.getvalue().splitlines() if "so far" in line] == []
    assert "run 1 at 2x — ended at 10/64 requests, 30.0 s" in out.getvalue()
