"""Walk the guides as a new user would: every command of their ```sh blocks, in order, in a
throwaway clone of this repository, on the local fleet of simulated GPUs.

A guide marks what it means to be run: each line of a ```sh block is one command (a line
ending in a backslash continues on the next). A trailing comment `# exits N` states an exit
status other than 0 (a `recipe fit` that does not fit exits 1). A ```text (or bare ```) block
that follows an sh block, with only blank lines between, is that block's output; `--write`
replaces it with the real output of the walk (stdout, with the clone's path removed). Commands
that are placeholders or lists of options stay outside sh blocks.

Each guide gets its own clone (`git clone` of this repository's committed HEAD, on a branch
named main, as a user's fresh clone is: commit what the guides need), with `denv` resolving
to `sys.executable -m reconciler` of this working tree, and every state folder denv writes
(XDG_STATE_HOME, XDG_CACHE_HOME, DENV_HOME, DENV_CACHE, DENV_OPTIMIZE_HOME) inside the
temporary folder. Whatever the walk started on the local fleet is stopped at the end, and
the folder removed.

    python scripts/walk_guides.py [--write] [docs/choose.md docs/optimize.md]

Adapter (runs git and the CLI); `parse` and `rewrite` are pure. tests/e2e/test_guides.py runs
it.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GUIDES = ("docs/choose.md", "docs/optimize.md")
COMMAND_TIMEOUT_S = 900  # a guard against a hung command, far above any guide command

_FENCE = re.compile(r"^(`{3,})(\S*)\s*$")
_EXITS = re.compile(r"\bexits?\s+(\d+)\b")


@dataclass(frozen=True)
class Command:
    guide: str
    line: int  # 1-based line of the guide where the command starts
    text: str  # as the guide prints it, continuation lines joined
    expect: int  # the exit status the guide states, else 0

    @property
    def where(self) -> str:
        return f"{self.guide}:{self.line}"


@dataclass(frozen=True)
class Block:
    """One ```sh block and, when one follows it, its output block: the lines of its opening
    and closing fences (0-based) and its language ("text" or none)."""

    commands: tuple[Command, ...]
    output: tuple[int, int, str] | None


@dataclass(frozen=True)
class Outcome:
    command: Command
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    @property
    def problems(self) -> list[str]:
        found = []
        if self.returncode != self.command.expect:
            found.append(f"exit {self.returncode}, expected {self.command.expect}")
        if "Traceback" in self.stdout or "Traceback" in self.stderr:
            found.append("a traceback")
        return found


def parse(text: str, guide: str = "") -> list[Block]:
    """The guide's sh blocks in order, with their commands and output blocks. Pure."""
    lines = text.splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        fence = _FENCE.match(lines[i])
        if not fence:
            i += 1
            continue
        end = _closing(lines, i)
        if fence.group(2) == "sh":
            commands = tuple(_commands(lines, i + 1, end, guide))
            blocks.append(Block(commands, _output_after(lines, end)))
        i = end + 1
    return blocks


def _closing(lines: list[str], start: int) -> int:
    """The line that closes the fence opened at `start`: as many backticks, nothing else (a
    longer fence can hold an output that has ``` lines of its own)."""
    ticks = "`" * _ticks(lines[start])
    for j in range(start + 1, len(lines)):
        if lines[j].strip() == ticks:
            return j
    raise ValueError(f"line {start + 1}: a code block that never ends")


def _commands(lines: list[str], start: int, end: int, guide: str) -> Iterator[Command]:
    j = start
    while j < end:
        first, parts = j, [lines[j].rstrip()]
        while parts[-1].endswith("\\") and j + 1 < end:
            parts[-1] = parts[-1][:-1].rstrip()
            j += 1
            parts.append(lines[j].strip())
        j += 1
        text = " ".join(part for part in parts if part)
        if not text or text.lstrip().startswith("#"):
            continue
        stated = _EXITS.search(_comment(text))
        yield Command(guide, first + 1, text, int(stated.group(1)) if stated else 0)


def _comment(command: str) -> str:
    """The shell comment that ends a command: from the first `#` outside quotes that starts a
    word."""
    quote = ""
    for k, char in enumerate(command):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (k == 0 or command[k - 1].isspace()):
            return command[k + 1 :]
    return ""


def _output_after(lines: list[str], end: int) -> tuple[int, int, str] | None:
    j = end + 1
    while j < len(lines) and not lines[j].strip():
        j += 1
    fence = _FENCE.match(lines[j]) if j < len(lines) else None
    if fence is None or fence.group(2) not in ("", "text"):
        return None
    return (j, _closing(lines, j), fence.group(2))


def shown(outcome: Outcome, clone: Path) -> str:
    """What a guide shows of a command's run: its stdout, the clone's path taken out, the
    lines' trailing blanks (table padding) dropped. Pure."""
    text = outcome.stdout.replace(f"{clone}/", "").replace(str(clone), ".")
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines())


def rewrite(text: str, blocks: Sequence[Block], outputs: dict[int, str]) -> str:
    """The guide with each output block's body replaced by the real output of its sh block's
    commands (keyed by the command's line; one command: its output as is, several: each
    after `$ command`). Blocks whose commands did not all run keep their text. Pure."""
    lines = text.splitlines()
    edits: list[tuple[tuple[int, int], list[str]]] = []
    for block in blocks:
        if block.output is None or any(c.line not in outputs for c in block.commands):
            continue
        if len(block.commands) == 1:
            body = outputs[block.commands[0].line].splitlines()
        else:
            body = []
            for c in block.commands:
                body += [f"$ {c.text}", *outputs[c.line].splitlines()]
        start, end, language = block.output
        fence = "`" * max([3, *(_ticks(line) + 1 for line in body)])
        edits.append(((start, end), [fence + language, *body, fence]))
    for (start, end), body in sorted(edits, reverse=True):
        lines[start : end + 1] = body
    return "\n".join(lines) + ("\n" if text.endswith("\n") else "")


def _ticks(line: str) -> int:
    """How many backticks a line starts with."""
    return len(line) - len(line.lstrip("`"))


class Sandbox:
    """A throwaway clone of this repository with its own state folders and a `denv` on PATH
    that runs this working tree's code."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.clone = folder / "repo"
        subprocess.run(["git", "clone", "-q", str(ROOT), str(self.clone)], check=True)
        git = ["git", "-C", str(self.clone)]
        # this repository's HEAD (detached in CI) on a branch named main, as a fresh clone is
        subprocess.run([*git, "fetch", "-q", "origin", "HEAD"], check=True)
        subprocess.run([*git, "checkout", "-q", "-B", "main", "FETCH_HEAD"], check=True)
        subprocess.run([*git, "config", "user.name", "Guide Walker"], check=True)
        subprocess.run([*git, "config", "user.email", "walker@denv.invalid"], check=True)
        shim = folder / "bin" / "denv"
        shim.parent.mkdir()
        shim.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m reconciler "$@"\n')
        shim.chmod(0o755)
        env = {**os.environ}
        env.pop("DENV_REPO", None)
        env.update(
            PATH=f"{shim.parent}{os.pathsep}{env.get('PATH', '')}",
            # this working tree's code, never the clone's (python -m puts the cwd first)
            PYTHONPATH=str(ROOT),
            PYTHONSAFEPATH="1",
            XDG_STATE_HOME=str(folder / "state"),
            XDG_CACHE_HOME=str(folder / "cache"),
            DENV_HOME=str(folder / "denv-home"),
            DENV_CACHE=str(folder / "denv-cache"),
            DENV_OPTIMIZE_HOME=str(folder / "optimize"),
        )
        self.env = env

    def run(self, command: Command) -> Outcome:
        started = time.monotonic()
        done = subprocess.run(
            ["bash", "-c", command.text],
            cwd=self.clone,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT_S,
        )
        elapsed = time.monotonic() - started
        return Outcome(command, done.returncode, done.stdout, done.stderr, elapsed)

    def stop_units(self) -> None:
        """Stop whatever the walk left running on the local fleet (none when all went well)."""
        stopper = ROOT / "scripts" / "stop_units.py"
        subprocess.run(
            [sys.executable, str(stopper), self.env["DENV_HOME"]], env=self.env, check=False
        )


@contextmanager
def sandbox() -> Iterator[Sandbox]:
    folder = Path(tempfile.mkdtemp(prefix="denv-guides-"))
    try:
        box = Sandbox(folder)
        try:
            yield box
        finally:
            box.stop_units()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


Report = Callable[[Outcome], None]


def walk_guide(guide: str, report: Report | None = None, write: bool = False) -> list[Outcome]:
    """Run every command of one guide in a fresh sandbox, in order, past failures (a later
    step may still work); with `write`, put the real outputs into the guide."""
    path = ROOT / guide
    text = path.read_text()
    blocks = parse(text, guide)
    outcomes: list[Outcome] = []
    outputs: dict[int, str] = {}
    with sandbox() as box:
        for block in blocks:
            for command in block.commands:
                outcome = box.run(command)
                outcomes.append(outcome)
                if not outcome.problems:  # a failed step keeps the guide's text
                    outputs[command.line] = shown(outcome, box.clone)
                if report:
                    report(outcome)
    if write:
        path.write_text(rewrite(text, blocks, outputs))
    return outcomes


def _print(outcome: Outcome) -> None:
    problems = outcome.problems
    mark = "ok " if not problems else "FAIL"
    print(f"{mark} {outcome.seconds:6.1f}s  {outcome.command.where}  {outcome.command.text}")
    for problem in problems:
        print(f"       {problem}")
    if problems:
        tail = (outcome.stdout + outcome.stderr).strip().splitlines()[-12:]
        print("\n".join(f"       | {line}" for line in tail))
    sys.stdout.flush()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("guides", nargs="*", default=list(GUIDES), help="guides to walk")
    parser.add_argument("--write", action="store_true", help="put real outputs in the guides")
    args = parser.parse_args(argv)
    started = time.monotonic()
    failed = 0
    for guide in args.guides:
        outcomes = walk_guide(guide, _print, write=args.write)
        failed += sum(1 for o in outcomes if o.problems)
    print(f"{failed} failed; the walk took {time.monotonic() - started:.0f}s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
