"""The fleets page over a real look: chat-8b reconciled onto the local fleet, two trials on its
trial GPUs (one whose owner runs, one whose owner is gone), and the example fleets that no
running stage uses, shown as declared and never dialled."""

from __future__ import annotations

import os
import re
import socket
import sys
from collections.abc import Iterator

import pytest

from reconciler.trials.owner import this_process
from reconciler.ui.pages import ROUTES
from reconciler.ui.site import Links, render
from reconciler.ui.state import UiState
from tests.ui.looked import agent, look, reconciled

SLEEP = [sys.executable, "-c", "import time; time.sleep(300)"]


@pytest.fixture(scope="module")
def looked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UiState]:
    state = {"XDG_STATE_HOME": str(tmp_path_factory.mktemp("state"))}
    with reconciled(tmp_path_factory, state) as (repo, home):
        trial = {"trial": "t-live", "purpose": "bench", "recipe": "llama-3.1-8b/vllm@1"}
        agent(home).launch(
            {"id": "t-live.w", "digest": "t", "gpus": [15], "argv": SLEEP,
             "labels": {**trial, "role": "aggregated", "owner": this_process()}}
        )  # fmt: skip
        gone = f"{socket.gethostname()}/{os.getpid()}/1"  # this pid, another start: gone
        agent(home).launch(
            {"id": "t-gone.w", "digest": "t", "gpus": [14], "argv": SLEEP,
             "labels": {"trial": "t-gone", "purpose": "optimize", "owner": gone}}
        )  # fmt: skip
        yield look(repo.path, repo.cache)


def page(state: UiState, route: str, **params: str) -> str:
    found = {r.name: r for r in ROUTES}[route]
    with state.lock:
        return render(found.view(state, params), state, Links(ROUTES), ROUTES, fragment=True)


def section(html: str, fleet: str) -> str:
    found = re.search(rf'<section class="fleet" id="fleet-{fleet}".*?</section>', html, re.S)
    assert found is not None, f"no section for {fleet}"
    return found[0]


def row(html: str, attribute: str, key: str) -> str:
    found = re.search(rf'<tr {attribute}="{re.escape(key)}".*?</tr>', html, re.S)
    assert found is not None, f"no row {attribute}={key}"
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", found[0])).strip()


def test_the_local_fleet_shows_its_hosts_gpus_units_and_trials(looked: UiState) -> None:
    local = section(page(looked, "fleets"), "local")
    assert "<dd>local</dd>" in local and "h200 (simulated)" in local
    # two replicas on GPUs 0 and 1; two trials on trial GPUs 14 and 15; 8 GPUs kept for trials
    assert row(local, "data-host", "localhost") == (
        "localhost 16 4 (0,1,14,15) 6 (2,3,4,5,6,7) 8 (8,9,10,11,12,13,14,15) yes"
    )
    for replica in (0, 1):
        unit = row(local, "data-unit", f"chat-8b.canary.local.aggregated-{replica}")
        assert re.fullmatch(
            rf"\S+ localhost ready chat-8b /canary [0-9a-f]{{12}} aggregated {replica} \d+ 0", unit
        ), unit
    assert row(local, "data-unit", "chat-8b.canary.local.router").split()[2] == "running"
    assert "t-live.w" not in local.split('class="trials"')[0]  # trials are listed apart
    live = row(local, "data-trial", "t-live")
    assert "bench llama-3.1-8b/vllm@1 localhost:15 1/1 running" in live
    assert live.endswith(f"{this_process()} running")
    gone = row(local, "data-trial", "t-gone")
    assert "abandoned" in gone and "--stop-abandoned" in gone


def test_a_fleet_the_look_did_not_observe_shows_its_declared_hosts(looked: UiState) -> None:
    assert set(looked.overview.snap.observations) == {"local"}  # example hosts never dialled
    html = page(looked, "fleets")
    h200 = section(html, "h200-use1")
    assert "not observed" in h200 and 'class="units"' not in h200
    first = row(h200, "data-host", "h200-01")
    assert first.startswith("h200-01 8 declared") and first.endswith("not observed")


def test_the_overview_links_each_fleet_to_its_section(looked: UiState) -> None:
    assert 'href="/fleets#fleet-local"' in page(looked, "overview")
