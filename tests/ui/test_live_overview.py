"""The overview, live: `denv ui` beside the bot (`denv reconcile` in a loop), both real
processes, on the local fleet's simulated GPUs (scripts/demo_stages.sh, shortened). The page is
opened once; the canary deploys the release's last revision, bakes it under traffic through the
official openai client, and a latency fault in its engine makes the bot roll it back to the
revision before. The canary's row shows each state in turn, and the page is never reloaded."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from reconciler.fleet.hostagent import AgentClient
from reconciler.fleet.model.observed import UnitRecord
from reconciler.fleet.transport import LocalTransport
from tests.e2e.bot import bot_env
from tests.e2e.load import light_load
from tests.e2e.test_rollout import ALARMS, WEIGHTS
from tests.fleet.conftest import wait_for
from tests.reconcile.conftest import GitRepo
from tests.ui.conftest import screenshot

RELEASE = """\
release:
  model: chat-8b
  weights: {weights}
  recipe: llama-3.1-8b/vllm@1
  overrides:
    settings: {{ max_batch: {batch} }}
  topology: {{ mode: aggregated, replicas: 1, gpus: 1, parallel: {{ tp: 1 }} }}
stages:
  - name: canary
    fleets: [local]
    bake: 60s
    alarms: [ttft-fast]
  - name: prod
    fleets: [local]
    bake: 3s
    alarms: [ttft-fast]
    approvals: 1
"""
# (the canary's bake is long: a loaded machine's slow passes never let it turn green before the
# fault's alarm fires, and a rollback ends the bake at once)

# The bot writes a stage's state once a pass is over, after its deploy, so "deploying" shows
# from the end of the pass that started the canary to the end of the next: one interval, made
# a few times the UI's refresh for the page to see it on a loaded machine.
BOT = ("reconcile", "--interval", "2s", "--ready-timeout", "60s", "--drain", "0.5s")
ROW = "chat-8b/canary/local"
STATE = f'tr[data-key="{ROW}"] td.state'
PHASES = ("deploying", "baking", "rolled back")

# Every text the canary's state cell takes, in order, as the page renders it: a MutationObserver
# sees each update of <main>, however short, where polling from here could miss one. It lives in
# the page's window, as the marker does: a reload would lose both.
WATCH = """state => {
  window.denvMarker = 1;
  window.denvSeen = [];
  const note = () => {
    const cell = document.querySelector(state);
    const text = cell ? cell.textContent.trim() : null;
    if (text && window.denvSeen[window.denvSeen.length - 1] !== text) window.denvSeen.push(text);
  };
  note();
  new MutationObserver(note).observe(document.documentElement,
    {subtree: true, childList: true, characterData: true});
}"""


@dataclass
class Live:
    """A repository, the environment `denv` runs in (its cache and agent home the test's), and
    the `denv` processes started on them, each with its output in a file."""

    repo: GitRepo
    env: dict[str, str]
    logs: Path
    processes: list[tuple[subprocess.Popen[bytes], Path]] = field(default_factory=list)

    def start(self, name: str, *args: str) -> tuple[subprocess.Popen[bytes], Path]:
        log = self.logs / f"{name}.log"
        argv = [sys.executable, "-m", "reconciler", *args, "--repo", str(self.repo.path)]
        with log.open("wb") as out:
            process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=self.env)
        self.processes.append((process, log))
        return self.processes[-1]

    def agent(self) -> AgentClient:
        return AgentClient(LocalTransport(env=self.env), python=sys.executable)

    def units(self, prefix: str) -> list[UnitRecord]:
        return [u for u in self.agent().units() if u.alive and u.id.startswith(prefix)]

    def stop(self) -> None:
        for process, log in reversed(self.processes):
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
            # shown by pytest when the test failed
            print(f"--- {log.name}\n{log.read_text(errors='replace')[-4000:]}")
        agent = self.agent()
        for unit in agent.units():  # no engine outlives the test, whatever happened
            agent.stop(unit.id, grace=2)


@pytest.fixture
def live(git_repo: GitRepo, tmp_path: Path) -> Iterator[Live]:
    git_repo.write("policies/alarms.yaml", ALARMS)
    git_repo.commit("the alarm the stages watch")
    found = Live(git_repo, bot_env(tmp_path / "cache") | {"DENV_FORGE": "local"}, tmp_path)
    try:
        yield found
    finally:
        found.stop()


def address(process: subprocess.Popen[bytes], log: Path) -> str | None:
    """The overview's URL from `denv ui`'s first line, once written."""
    text = log.read_text(errors="replace")
    assert process.poll() is None, f"denv ui exited {process.returncode}:\n{text[-3000:]}"
    if "\n" not in text:
        return None
    first = text.split("\n", 1)[0]
    found = re.fullmatch(r"denv ui: (http://127\.0\.0\.1:\d+/)", first)
    assert found, f"denv ui's first line is not its address: {first!r}"
    return found[1]


def shown(page: Page, phase: str, timeout: float) -> None:
    """Wait until the canary's state has shown `phase` (seen by WATCH)."""
    page.wait_for_function(
        "phase => window.denvSeen.some(s => s.startsWith(phase))", arg=phase, timeout=timeout * 1000
    )


def fault(engines: list[UnitRecord], **faults: float) -> None:
    for unit in engines:
        request = urllib.request.Request(
            f"http://127.0.0.1:{unit.port}/admin/faults", data=json.dumps(faults).encode()
        )
        request.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(request, timeout=10) as answer:
            assert answer.status == 200


def test_the_overview_shows_a_rollout_deploy_bake_and_roll_back_live(
    live: Live, page: Page
) -> None:
    live.repo.write("releases/chat-8b/denv.yaml", RELEASE.format(weights=WEIGHTS, batch=128))
    good = live.repo.commit("chat-8b: max_batch 128")
    live.repo.write("releases/chat-8b/denv.yaml", RELEASE.format(weights=WEIGHTS, batch=64))
    bad = live.repo.commit("chat-8b: max_batch 64")

    ui, ui_log = live.start("ui", "ui", "--listen", "127.0.0.1:0", "--refresh", "0.5s")
    url = wait_for(lambda: address(ui, ui_log), timeout=60, what="denv ui's address")
    page.goto(str(url))
    page.evaluate(WATCH, STATE)
    live.start(
        "bot", "reconcile", "--interval", "0.3s", "--ready-timeout", "60s", "--drain", "0.5s"
    )

    cell = page.locator(STATE)
    shown(page, "baking", timeout=180)
    [router] = live.units("chat-8b.canary.local.router")
    engines = [u for u in live.units("chat-8b.canary.") if not u.id.endswith("router")]
    assert [u.labels.get("revision") for u in engines] == [bad], engines
    with light_load(f"http://127.0.0.1:{router.port}/v1", workers=3, max_tokens=2) as load:
        load.more(3, "answers from the canary")  # the alarm has samples before the fault
        expect(cell).to_have_text(re.compile(r"^baking \S+/1m"))
        screenshot(page, "overview-baking")
        fault(engines, spike_ms=800)
        shown(page, "rolled back", timeout=120)
    expect(cell).to_contain_text(f"rolled back to {good[:12]} ({bad[:12]} rejected")
    screenshot(page, "overview-rolled-back")

    seen: list[str] = page.evaluate("window.denvSeen")
    print("the canary's state as the page showed it:", *seen, sep="\n  ")
    phases = [next((p for p in PHASES if text.startswith(p)), text) for text in seen]
    assert [p for p in dict.fromkeys(phases) if p in PHASES] == list(PHASES), seen
    assert page.evaluate("window.denvMarker") == 1, "the page was reloaded"
