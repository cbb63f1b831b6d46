"""The overview, live: `denv ui` beside the bot (`denv reconcile` in a loop), both real
processes, on the local fleet's simulated GPUs (scripts/demo_stages.sh, shortened). The page is
opened once; the canary deploys the release's last revision, bakes it under traffic through the
official openai client, and a latency fault in its engine makes the bot roll it back to the
revision before. The canary's row shows each state in turn, and the page is never reloaded."""

from __future__ import annotations

import json
import re
import urllib.request

from playwright.sync_api import Page, expect
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

from reconciler.fleet.model.observed import UnitRecord
from tests.e2e.load import light_load
from tests.labs.release import release_yaml, stage
from tests.ui.conftest import Pages, screenshot
from tests.ui.denv import Denv

STAGES = (
    stage("canary", "local", "bake: 60s", "alarms: [ttft-fast]"),
    stage("prod", "local", "bake: 3s", "alarms: [ttft-fast]", "approvals: 1"),
)
# (the canary's bake is long: a loaded machine's slow passes never let it turn green before the
# fault's alarm fires, and a rollback ends the bake at once)

# The alarm's window holds its few requests (a faulted one takes 1.6s) even on a loaded machine
ALARMS = (
    "alarms:\n  ttft-fast: { metric: ttft, stat: p99, max: 500ms, window: 6s, min_requests: 3 }\n"
)

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


def shown(page: Page, phase: str, timeout: float) -> None:
    """Wait until the canary's state has shown `phase` (seen by WATCH)."""
    try:
        page.wait_for_function(
            "phase => window.denvSeen.some(s => s.startsWith(phase))",
            arg=phase,
            timeout=timeout * 1000,
        )
    except PlaywrightTimeoutError:
        seen = page.evaluate("window.denvSeen")
        raise AssertionError(f"no {phase!r} in {timeout:g}s; the canary showed {seen}") from None


def fault(engines: list[UnitRecord], **faults: float) -> None:
    for unit in engines:
        request = urllib.request.Request(
            f"http://127.0.0.1:{unit.port}/admin/faults", data=json.dumps(faults).encode()
        )
        request.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(request, timeout=10) as answer:
            assert answer.status == 200


def test_the_overview_shows_a_rollout_deploy_bake_and_roll_back_live(
    denv: Denv, pages: Pages, page: Page
) -> None:
    denv.repo.write("policies/alarms.yaml", ALARMS)
    denv.repo.write("releases/chat-8b/denv.yaml", release_yaml(*STAGES, batch=128))
    good = denv.repo.commit("chat-8b: max_batch 128")
    denv.repo.write("releases/chat-8b/denv.yaml", release_yaml(*STAGES, batch=64))
    bad = denv.repo.commit("chat-8b: max_batch 64")

    page.goto(denv.ui("--refresh", "0.5s"))
    page.evaluate(WATCH, STATE)
    denv.start("bot", *BOT)

    cell = page.locator(STATE)
    shown(page, "baking", timeout=180)
    [router] = denv.units("chat-8b.canary.local.router")
    engines = [u for u in denv.units("chat-8b.canary.") if not u.id.endswith("router")]
    assert [u.labels.get("revision") for u in engines] == [bad], engines
    with light_load(f"http://127.0.0.1:{router.port}/v1", workers=3, max_tokens=2) as load:
        load.more(3, "answers from the canary")  # the alarm has samples before the fault
        expect(cell).to_have_text(re.compile(r"^baking \S+/1m"))
        screenshot(page, "overview-baking")
        fault(engines, spike_ms=800)
        try:
            shown(page, "rolled back", timeout=120)
        finally:  # pytest shows it when the test failed
            print(f"load: {load.answered} answered; last failures: {load.failed[-3:]}")
    expect(cell).to_contain_text(f"rolled back to {good[:12]} ({bad[:12]} rejected")
    screenshot(page, "overview-rolled-back")

    seen: list[str] = page.evaluate("window.denvSeen")
    print("the canary's state as the page showed it:", *seen, sep="\n  ")
    phases = [next((p for p in PHASES if text.startswith(p)), text) for text in seen]
    assert [p for p in dict.fromkeys(phases) if p in PHASES] == list(PHASES), seen
    assert page.evaluate("window.denvMarker") == 1, "the page was reloaded"

    phone = pages(phone=True)
    phone.goto(page.url)
    expect(phone.locator(STATE)).to_contain_text("rolled back to")
    # readable on a phone: the page never scrolls sideways (the wide table scrolls in its box)
    assert phone.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    screenshot(phone, "overview-phone")

    # the rollback's pull request (the local forge's) opens from the row, and so does the
    # release's pipeline with the alarm's history the UI kept while it watched
    page.locator(STATE).get_by_role("link", name=re.compile(r"PR #\d+")).click()
    expect(page.locator("main h1")).to_contain_text("Roll back chat-8b canary")
    screenshot(page, "pull")
    page.goto(page.url.split("/pulls/")[0] + "/releases/chat-8b")
    expect(page.locator('[data-stage="chat-8b/canary"]')).to_contain_text("Alarm history")
    expect(page.locator('[data-stage="chat-8b/canary"] svg.spark')).to_be_visible()
    screenshot(page, "release-rolled-back")
