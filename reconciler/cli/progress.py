"""CLI: the one progress sink of long commands (bench run, pr bench, parity run, optimize
start, reconcile, deploy, plan).

On a terminal: rich bars for counted work (a load level's requests, a trial's, parity's
prompts) and a spinner line for the current phase. Elsewhere (CI logs, a pipe): no bars, one
plain line a finished level, trial or phase instead. Either way each finished task and each
message is one line with the time since the command started:

    [  12.3s] level 2/4: concurrency 8 — 64/64 requests, 7.1 s

A task that ends before its total (a run stopped early) is ended by its caller (`end`): its
line comes then, with its own duration, not when the command exits. In a log, counted work
that goes on for `QUIET_S` without a line gets one saying how far it is, so a log is never
silent for long while requests are answered.

Everything goes to stderr, so stdout stays the command's output (its table or --json).
Services never see this class: they get its bound methods as their progress and message
callbacks.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType

from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.text import Text

from reconciler.cli import terminal

Clock = Callable[[], float]

QUIET_S = 10.0  # in a log: a line at least this often while counted work goes on


class _Count(ProgressColumn):
    """'3/10' for counted tasks; nothing for the phase line, which has no total."""

    def render(self, task: Task) -> Text:
        if task.total is None:
            return Text("")
        return Text(f"{int(task.completed)}/{int(task.total)}")


@dataclass
class _Task:
    name: str  # as shown: 'level 2/4: concurrency 8'
    started: float
    done: int = 0
    total: int = 0
    bar: TaskID | None = None  # on a terminal


class ProgressSink:
    """Progress and messages of one command. `numbered=("level", 4)` names each new label
    'level N/4: LABEL' in the order they start; `unit` follows the counts ('requests')."""

    def __init__(
        self,
        console: Console | None = None,
        *,
        numbered: tuple[str, int] | None = None,
        unit: str = "",
        live: bool | None = None,
        clock: Clock = time.monotonic,
    ) -> None:
        self.console = console if console is not None else terminal.console(stderr=True)
        self.live = self.console.is_terminal if live is None else live
        self.numbered = numbered
        self.unit = unit
        self.clock = clock
        self.start = clock()
        self._said = self.start  # when the last line was printed
        self._tasks: dict[str, _Task] = {}  # started and not finished
        self._started = 0
        self._bars: Progress | None = None
        self._phase: TaskID | None = None

    def __enter__(self) -> ProgressSink:
        if self.live:
            self._bars = Progress(
                TextColumn("{task.description}", markup=False),
                BarColumn(),
                _Count(),
                TimeElapsedColumn(),
                console=self.console,
                transient=True,
            )
            self._bars.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        for label, task in list(self._tasks.items()):
            if task.done < task.total:
                self._finish(label, task, "ended at ")
        if self._bars is not None:
            self._bars.stop()
            self._bars = None

    # -- the callbacks services take ---------------------------------------------------------

    def update(self, label: str, done: int, total: int) -> None:
        """Counted work: `done` of `total` in task `label` (a load level, a trial)."""
        task = self._tasks.get(label)
        if task is None:
            self._started += 1
            task = self._tasks[label] = _Task(self._name(label), self.clock())
            if self._bars is not None:
                task.bar = self._bars.add_task(task.name, total=total)
        task.done, task.total = done, total
        if self._bars is not None and task.bar is not None:
            self._bars.update(task.bar, completed=done, total=total)
        if total and done >= total:
            self._finish(label, task, "")
        elif self._bars is None and self.clock() - self._said >= QUIET_S:
            unit = f" {self.unit}" if self.unit else ""
            self.say(f"{task.name} — {done}/{total}{unit} so far")

    def end(self, label: str, how: str = "ended at ") -> None:
        """Task `label` ended now, short of its total (a run stopped early): its line at once,
        with its own duration. Nothing when it finished already, or never started."""
        task = self._tasks.get(label)
        if task is not None:
            self._finish(label, task, how)

    def counter(self, label: str) -> Callable[[int, int], None]:
        """A `(done, total)` callback for one task, as parity's runner takes."""
        return lambda done, total: self.update(label, done, total)

    def phase(self, message: str) -> None:
        """What the command is doing now: the spinner line on a terminal, a line elsewhere."""
        if self._bars is None:
            self.say(message)
            return
        if self._phase is None:
            self._phase = self._bars.add_task(message, total=None)
        else:
            self._bars.update(self._phase, description=message)

    def say(self, message: str) -> None:
        """One line that stays: a warning, a reclaimed trial, a phase in a log."""
        self._said = self.clock()
        self.console.print(
            f"[{self.clock() - self.start:6.1f}s] {message}",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )

    # -- helpers -----------------------------------------------------------------------------

    def _name(self, label: str) -> str:
        if self.numbered is None:
            return label
        kind, count = self.numbered
        return f"{kind} {self._started}/{count}: {label}"

    def _finish(self, label: str, task: _Task, how: str) -> None:
        del self._tasks[label]
        if self._bars is not None and task.bar is not None:
            self._bars.remove_task(task.bar)
        unit = f" {self.unit}" if self.unit else ""
        took = self.clock() - task.started
        self.say(f"{task.name} — {how}{task.done}/{task.total}{unit}, {took:.1f} s")
