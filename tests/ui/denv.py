"""`denv` as the UI's browser tests run it: real processes (`denv ui`, the bot) on a test
repository, with the test's cache and agent home (tests/e2e/bot.py), each one's output in a file;
the UI's address read from its first line; at the end every process stopped, and every unit they
started on the local fleet."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from reconciler.fleet.hostagent import AgentClient
from reconciler.fleet.model.observed import UnitRecord
from reconciler.fleet.transport import LocalTransport
from tests.fleet.conftest import wait_for
from tests.labs.processes import stop_process
from tests.reconcile.conftest import GitRepo

# the contract of `denv ui`: its first line, flushed, says where the overview is
ADDRESS = re.compile(r"denv ui: (http://127\.0\.0\.1:\d+/)")


@dataclass
class Denv:
    repo: GitRepo
    env: dict[str, str]
    logs: Path
    processes: list[tuple[subprocess.Popen[bytes], Path]] = field(default_factory=list)

    def start(
        self, name: str, *args: str, env: Mapping[str, str] | None = None
    ) -> tuple[subprocess.Popen[bytes], Path]:
        """`denv ARGS --repo REPO` in the background (`env`: more variables), its output in
        the file `name`-N.log."""
        log = self.logs / f"{name}-{len(self.processes)}.log"
        argv = [sys.executable, "-m", "reconciler", *args, "--repo", str(self.repo.path)]
        with log.open("wb") as out:
            process = subprocess.Popen(
                argv, stdout=out, stderr=subprocess.STDOUT, env={**self.env, **(env or {})}
            )
        self.processes.append((process, log))
        return self.processes[-1]

    def ui(self, *args: str, env: Mapping[str, str] | None = None) -> str:
        """`denv ui` on a free loopback port; the overview's URL once it serves."""
        process, log = self.start("ui", "ui", "--listen", "127.0.0.1:0", *args, env=env)
        return str(wait_for(lambda: address(process, log), timeout=60, what="denv ui's address"))

    def agent(self) -> AgentClient:
        return AgentClient(LocalTransport(env=self.env), python=sys.executable)

    def units(self, prefix: str) -> list[UnitRecord]:
        """The live units on the local fleet whose id starts with `prefix`."""
        return [u for u in self.agent().units() if u.alive and u.id.startswith(prefix)]

    def stop(self) -> None:
        for process, log in reversed(self.processes):
            stop_process(process, grace=60)
            # pytest shows it when the test failed
            print(f"--- {log.name}\n{log.read_text(errors='replace')[-4000:]}")
        agent = self.agent()
        for unit in agent.units():  # no engine outlives the test, whatever happened
            agent.stop(unit.id, grace=2)


def address(process: subprocess.Popen[bytes], log: Path) -> str | None:
    """The URL in `denv ui`'s first line, once written; fails when the process exited."""
    text = log.read_text(errors="replace")
    assert process.poll() is None, f"denv ui exited {process.returncode}:\n{text[-3000:]}"
    if "\n" not in text:
        return None
    first = text.split("\n", 1)[0]
    found = ADDRESS.fullmatch(first)
    assert found, f"denv ui's first line is not its address: {first!r}"
    return found[1]
