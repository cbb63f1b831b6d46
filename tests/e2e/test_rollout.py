"""Stages end to end: simulated GPU hosts behind real sshd in network namespaces (one
module-scoped pair), a git repository per test, the bot (`denv reconcile` in a loop) as a real
process, simulator engines behind the real sglang-router, and the local forge or the fake
GitHub."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import openai
import pygit2
import pytest
from pygit2.enums import CheckoutStrategy

from reconciler.fleet.model.observed import UnitRecord
from reconciler.forge.local import LocalForge
from reconciler.forge.models import PrState
from tests.e2e.test_reconcile import Lab, fleet_file
from tests.fleet.conftest import wait_for
from tests.forge.fake_github import FakeGitHub
from tests.forge.gitrepo import git
from tests.forge.loopback import LoopbackServer
from tests.labs.processes import stop_process
from tests.labs.release import release_yaml, stage
from tests.labs.sshd import SshLab, SshServer
from tests.labs.workspace import copy_denv_files
from tests.reconcile.conftest import GitRepo

ALARMS = (
    "alarms:\n  ttft-fast: { metric: ttft, stat: p99, max: 500ms, window: 3s, min_requests: 3 }\n"
)


@pytest.fixture(scope="module")
def hosts(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[SshLab, dict[str, SshServer]]]:
    ssh = SshLab(
        tmp_path_factory.mktemp("ssh"), own_home=True, own_addresses=True
    )  # no run of ~/.bashrc a command
    try:
        yield ssh, {name: ssh.start(name, namespaced=True) for name in ("lab", "lab2")}
    finally:
        ssh.stop()


def sync(repo: GitRepo) -> None:
    """The work tree as main is now (a forge may have merged into it)."""
    repo.git.checkout_head(strategy=CheckoutStrategy.FORCE)


@dataclass
class Bot:
    """`denv reconcile` in a loop, as the bot runs it; its output in files."""

    process: subprocess.Popen[bytes]
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self) -> None:
        stop_process(self.process, grace=60)


@dataclass
class Stages:
    """A repository with the two-stage release, the hosts, and the bot once started."""

    lab: Lab
    env: dict[str, str]
    remote: Path | None = None  # a bare repository standing for GitHub's git side
    bots: list[Bot] = field(default_factory=list)
    load_stop: threading.Event = field(default_factory=threading.Event)
    answered: list[int] = field(default_factory=lambda: [0])

    def release(self, batch: int, promotion: str = "manual", bake: str = "4s") -> str:
        """Commit the release (max_batch `batch`; the canary's `bake`) on main."""
        path = self.lab.repo.path
        if self.remote is not None:  # what was merged on GitHub first
            git(path, "fetch", "-q", str(self.remote), "main")
            git(path, "reset", "-q", "--hard", "FETCH_HEAD")
        sync(self.lab.repo)
        text = release_yaml(
            stage("canary", "lab", f"bake: {bake}", "alarms: [ttft-fast]"),
            stage("prod", "lab2", "bake: 4s", "alarms: [ttft-fast]", f"promotion: {promotion}"),
            batch=batch,
        )
        self.lab.repo.write("releases/chat-8b/denv.yaml", text)
        commit = self.lab.repo.commit(f"chat-8b: max_batch {batch}")
        if self.remote is not None:
            git(path, "push", "-q", str(self.remote), "main")
        return commit

    def start_bot(self) -> Bot:
        log = self.lab.cache / f"bot-{len(self.bots)}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        where = self.remote or self.lab.repo.path
        argv = [sys.executable, "-m", "reconciler", "reconcile", "--repo", str(where)]
        argv += ["--interval", "0.5s", "--ready-timeout", "60s", "--drain", "1s"]
        with log.open("wb") as out:
            process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=self.env)
        self.bots.append(Bot(process, log))
        return self.bots[-1]

    def state(self) -> dict[str, Any]:
        """The rollout state the bot keeps with its lease on the canary's fleet."""
        note = self.lab.agent("lab").lease("reconciler", "test", 0, peek=True).note
        found: dict[str, Any] = ((note or {}).get("checks") or {}).get("rollout") or {}
        return found

    def stage(self, name: str) -> dict[str, Any]:
        found: dict[str, Any] = self.state().get("stages", {}).get(f"chat-8b/{name}") or {}
        return found

    def engines(self, fleet: str) -> list[UnitRecord]:
        return [u for u in self.lab.units(fleet) if u.alive and not u.id.endswith("router")]

    def endpoint(self, fleet: str) -> str:
        [router] = [u for u in self.lab.units(fleet) if u.alive and u.id.endswith("router")]
        return f"http://{self.lab.servers[fleet].address}:{router.port}/v1"

    def fault(self, fleet: str, **faults: Any) -> None:
        for unit in self.engines(fleet):
            url = f"http://{self.lab.servers[fleet].address}:{unit.port}/admin/faults"
            body = json.dumps(faults).encode()
            request = urllib.request.Request(url, data=body, method="POST")
            request.add_header("Content-Type", "application/json")
            with urllib.request.urlopen(request, timeout=10) as answer:
                assert answer.status == 200

    def load(self, fleet: str, workers: int = 4) -> None:
        """Requests to the fleet's endpoint until the test ends (so alarms have data)."""
        url = self.endpoint(fleet)

        def ask() -> None:
            client = openai.OpenAI(base_url=url, api_key="unused", max_retries=0, timeout=30)
            while not self.load_stop.is_set():
                try:
                    client.chat.completions.create(
                        model="chat-8b", messages=[{"role": "user", "content": "hi"}], max_tokens=2
                    )
                    self.answered[0] += 1
                except openai.OpenAIError:
                    self.load_stop.wait(0.1)  # a roll in progress: try again shortly

        for _ in range(workers):
            threading.Thread(target=ask, daemon=True).start()

    def wait(self, condition: Any, what: str, timeout: float = 60) -> Any:
        try:
            found = wait_for(condition, timeout=timeout, what=what)
            print(f"{time.monotonic():.1f} {what}")
            return found
        except AssertionError:
            print("\n".join(b.output()[-6000:] for b in self.bots))
            raise


@pytest.fixture
def stages(hosts: tuple[SshLab, dict[str, SshServer]], tmp_path: Path) -> Iterator[Stages]:
    ssh, servers = hosts
    repo = GitRepo(copy_denv_files(tmp_path / "repo"), tmp_path / "clones")
    for name, server in servers.items():
        repo.write(f"fleets/{name}.yaml", fleet_file(name, server, ssh))
    repo.write("policies/alarms.yaml", ALARMS)
    repo.commit("initial")
    lab = Lab(repo, ssh, servers, tmp_path / "cache")
    env = {**os.environ, "DENV_CACHE": str(lab.cache), "DENV_HOME": str(lab.cache / "home")}
    env.pop("DENV_REPO", None)
    found = Stages(lab, env)
    yield found
    found.load_stop.set()
    for bot in found.bots:
        bot.stop()
    for name in servers:  # no engine and no bot note outlives the test
        try:
            agent = lab.agent(name)
            for unit in agent.units():
                agent.stop(unit.id, grace=1)
            agent.lease("reconciler", "cleanup", 1, note={})
            agent.lease("reconciler", "cleanup", 0, release=True)
        except Exception:
            pass


def head_of(repo: GitRepo) -> str:
    return str(repo.git.references["refs/heads/main"].peel(pygit2.Commit).id)


def promote_prs(forge: Any, state: PrState = PrState.OPEN) -> list[Any]:
    return [p for p in forge.pull_requests(state) if p.head_branch.startswith("denv/promote/")]


def rollback_prs(forge: Any) -> list[Any]:
    return [p for p in forge.pull_requests() if p.head_branch.startswith("denv/rollback/")]


# A bad revision's canary bakes long: a slow pass under load never lets it turn green before
# the fault's alarm fires (a rollback ends the bake anyway: it costs no time).
BAD_BAKE = "60s"


def roll_back_on_fault(
    stages: Stages, bot: Bot, rollback_titles: Callable[[], list[str]], good: str, bad: str
) -> dict[str, Any]:
    """The canary baking `bad`, a latency fault: the bot returns the canary to `good` and
    opens a rollback PR (`rollback_titles` lists the forge's). The seconds each step took
    after the fault, and the bot's passes by the rollback."""
    stages.wait(
        lambda: (
            stages.stage("canary").get("revision") == bad
            and stages.stage("canary").get("phase") == "baking"
        ),
        "the canary baking the new revision",
    )
    faulted = time.time()  # the bot's clock: its passes are stamped with Unix time
    stages.fault("lab", spike_ms=800)
    scrapes: list[float] = []  # the passes (each scrapes first) seen before the rollback

    def rolled_back() -> bool:
        state = stages.state()
        if (state.get("stages", {}).get("chat-8b/canary") or {}).get("phase") == "rolled back":
            return True
        scrapes.append(state.get("checked_at") or 0.0)
        return False

    stages.wait(rolled_back, "the rollback")
    decided = time.time() - faulted
    seen = passes(bot)
    record = stages.stage("canary")
    assert (record["rolled_back"], record["override"]) == (bad, good), record
    assert "ttft p99" in record["reason"]
    [title] = stages.wait(rollback_titles, "the rollback PR")
    assert good[:12] in title
    at = record["rolled_back_at"] - faulted
    quiet = sorted({s - faulted for s in scrapes if s < record["rolled_back_at"]})
    figures = {"decided": decided, "scraped": at, "pr": time.time() - faulted, "passes": seen}
    print(f"rollback after the fault: {figures}; quiet scrapes at {quiet}")
    # Within one alarm window: the deciding scrape came after the fault, and no scrape a
    # whole window (3 s) or more after it went without firing. Wall time beyond that is
    # the bot's pass length, which a loaded machine stretches.
    assert at > 0 and all(q < 3.0 for q in quiet), (at, quiet)
    return figures


def after_rollback(stages: Stages, bot: Bot, figures: dict[str, Any], good: str, bad: str) -> None:
    """The canary serves the good revision again; the passes after the rollback (the roll
    back is one) promote nothing, and prod keeps the good revision."""
    stages.wait(
        lambda: any(u.labels.get("revision") == good for u in stages.engines("lab")),
        "the canary's engine at the last good revision",
    )
    stages.wait(lambda: passes(bot) >= figures["passes"] + 2, "two passes after the rollback")
    assert stages.state()["rejected"].get(bad)
    assert all(u.labels.get("revision") == good for u in stages.engines("lab2"))


def rollback_titles(fake: FakeGitHub) -> list[str]:
    return [p["title"] for p in fake.pulls.values() if p["head"].startswith("denv/rollback/")]


def passes(bot: Bot) -> int:
    return bot.output().count(": planned +")


def test_local_forge_auto_promotion_then_rollback(stages: Stages) -> None:
    good = stages.release(batch=128, promotion="auto")
    bot = stages.start_bot()
    stages.wait(lambda: stages.stage("canary").get("phase") == "baking", "the canary", 90)
    stages.load("lab")
    forge = LocalForge(stages.lab.repo.path)
    [merged] = stages.wait(lambda: promote_prs(forge, PrState.MERGED), "the auto promotion")
    assert merged.author == "denv-bot" and "prod" in merged.title
    bad = stages.release(batch=64, promotion="auto", bake=BAD_BAKE)  # while prod deploys
    stages.wait(
        lambda: any(u.labels.get("revision") == good for u in stages.engines("lab2")),
        "prod at the promoted revision",
    )
    figures = roll_back_on_fault(
        stages, bot, lambda: [p.title for p in rollback_prs(forge)], good, bad
    )
    after_rollback(stages, bot, figures, good, bad)
    assert promote_prs(forge) == []  # the rejected revision is never promoted


TOKEN = "ghp_DenvRolloutToken0123456789abcNEVERLOG"


def test_github_promotion_counts_only_approvals_with_permission_then_rollback(
    stages: Stages, tmp_path: Path
) -> None:
    stages.remote = tmp_path / "gh" / "acme" / "fleet.git"
    git(tmp_path, "clone", "-q", "--bare", str(stages.lab.repo.path), str(stages.remote))
    fake = FakeGitHub(
        bare=stages.remote,
        tokens={TOKEN: "denv-bot"},
        permissions={"denv-bot": "write", "grace": "admin", "mallory": "read"},
    )
    server = LoopbackServer(fake.handle)
    fake.url = server.url
    # the bot pushes its branches to GITHUB_SERVER_URL/owner/name.git: the bare repository
    stages.env |= {
        "DENV_FORGE": "github",
        "DENV_GITHUB_TOKEN": TOKEN,
        "GITHUB_REPOSITORY": fake.full_name,
        "GITHUB_API_URL": fake.api_url,
        "GITHUB_SERVER_URL": f"file://{tmp_path / 'gh'}",
        "DENV_BOT_LOGIN": "denv-bot",
    }
    try:
        good = stages.release(batch=128)
        bot = stages.start_bot()
        stages.wait(lambda: stages.stage("canary").get("phase") == "baking", "the canary", 90)
        stages.load("lab")
        [number] = stages.wait(
            lambda: [n for n, p in fake.pulls.items() if p["head"] == "denv/promote/chat-8b/prod"],
            "the promotion PR on GitHub",
        )
        assert fake.pulls[number]["user"] == "denv-bot"
        body = fake.pulls[number]["body"]
        assert good[:12] in body and "ttft-fast" in body
        assert "bake) |" in body and "**Bench:** none yet" in body  # read over the whole bake
        fake.review(number, "mallory")  # read permission only
        stages.wait(
            lambda: any(
                "mallory" in b and "does not count" in b
                for b in (stages.stage("canary").get("promotion") or {}).get("blockers", [])
            ),
            "the bot's gate seeing mallory's approval",
        )
        assert stages.stage("canary")["promotion"]["state"] == "open"
        assert not fake.pulls[number]["merged"]
        fake.review(number, "grace")
        stages.wait(lambda: fake.pulls[number]["merged"], "the merge after grace's approval")
        bad = stages.release(batch=64, bake=BAD_BAKE)  # while prod deploys
        stages.wait(
            lambda: any(u.labels.get("revision") == good for u in stages.engines("lab2")),
            "prod at the promoted revision",
        )
        roll_back_on_fault(stages, bot, lambda: rollback_titles(fake), good, bad)
        [rollback] = [p for p in fake.pulls.values() if p["head"].startswith("denv/rollback/")]
        assert (rollback["user"], rollback["state"]) == ("denv-bot", "open")
        assert bad[:12] in rollback["body"] and "ttft-fast" in rollback["body"]
        promotions = [p for p in fake.pulls.values() if p["head"].startswith("denv/promote/")]
        assert [p["merged"] for p in promotions] == [True]
    finally:
        for running in stages.bots:
            running.stop()
        server.close()
    assert fake.unexpected == []
