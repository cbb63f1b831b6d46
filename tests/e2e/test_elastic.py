"""Elastic stages end to end on a local fleet of simulated GPUs: `denv reconcile --once` as a
subprocess (its autoscaler deciding at every pass: the policy's interval is 0s), simulator
engines behind the real sglang-router, load from the official openai client. Git owns the
bounds; the bot's count moves inside them, drains a replica before it stops, never counts
what did not arrive, and carries on from the fleets after a SIGKILL."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest

from reconciler.faults import PAUSE_ENV
from reconciler.fleet.model.observed import UnitRecord
from reconciler.rollout.capacity import replica_capacity, targets
from tests.e2e.load import Load, ask, light_load
from tests.fleet.conftest import wait_for
from tests.labs.elastic_local import FLEET, ElasticLab, elastic_lab
from tests.labs.operated import actions_done
from tests.labs.release import RECIPE
from tests.reconcile.conftest import GitRepo

KEY = f"chat-8b/canary/{FLEET}"


def busy(url: str, workers: int) -> AbstractContextManager[Load]:
    """`workers` clients streaming 300 tokens each (about 2 s at the simulator's H200 speed,
    so that requests overlap), each prompt its own (spread over the router's workers)."""
    return light_load(url, workers, max_tokens=300, stream=True, timeout=60, distinct=True)


# The lab's agent home outside the repository (the test's tmp_path): a commit never meets the
# agent's files changing under it.
@pytest.fixture
def lab(git_repo: GitRepo, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ElasticLab]:
    yield from elastic_lab(git_repo, tmp_path_factory.mktemp("lab"))


@pytest.fixture
def small_lab(git_repo: GitRepo, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ElasticLab]:
    """A fleet of 2 GPUs."""
    yield from elastic_lab(git_repo, tmp_path_factory.mktemp("lab"), gpus=2)


def workers(endpoint: str) -> set[str]:
    """The URLs of the engines the router sends to (its /workers)."""
    root = endpoint.removesuffix("/v1")
    with urllib.request.urlopen(root + "/workers", timeout=5) as answer:
        return {w["url"] for w in json.load(answer)["workers"]}


def url_of(lab: ElasticLab, unit: UnitRecord) -> str:
    fleet = lab.repo.path / f"fleets/{FLEET}.yaml"
    address = fleet.read_text().split("address: ")[1].split(",")[0]
    return f"http://{address}:{unit.port}"


def scaling(lab: ElasticLab) -> dict[str, Any]:
    """What the bot kept for the deployment in its lease note (checks.scaling)."""
    note = lab.agent().lease("reconciler", "a-test/peek", 0, peek=True).note
    assert note is not None
    kept: dict[str, Any] = note["checks"]["scaling"]["deployments"][KEY]
    return kept


def scaled(done: subprocess.CompletedProcess[str], before: int, after: int) -> str:
    """The reason the bot gave for changing the count (it says why, with the count)."""
    marker = f"scale {KEY}: {before} → {after} ("
    [line] = [line for line in (done.stdout + done.stderr).splitlines() if marker in line]
    return line.split(marker, 1)[1].rstrip(")")


class Paused:
    """`denv reconcile --once` paused at a step boundary (DENV_FAULT_PAUSE_AT) until resumed."""

    def __init__(self, lab: ElasticLab, step: str, folder: Path) -> None:
        self.marker = folder / f"paused-{step}"
        env = {**lab.env, PAUSE_ENV: f"{step}:{self.marker}"}
        argv = [sys.executable, "-m", "reconciler", "reconcile", "--once", *lab.timing]
        self.process = subprocess.Popen(
            [*argv, "--repo", str(lab.repo.path)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        wait_for(
            lambda: self.marker.exists() or self.process.poll() is not None,
            timeout=120,
            what=f"the bot at {step}",
        )
        assert self.process.poll() is None, self.process.communicate()

    def resume(self) -> subprocess.CompletedProcess[str]:
        self.marker.unlink()
        out, err = self.process.communicate(timeout=180)
        assert self.process.returncode == 0, out + err
        return subprocess.CompletedProcess(self.process.args, 0, out, err)


def test_scale_up_under_load_joins_the_router_when_ready(lab: ElasticLab, tmp_path: Path) -> None:
    lab.release(1, 3)
    lab.reconcile()
    url = lab.endpoint()
    [first] = lab.engines()
    with busy(url, 10) as load:
        load.more(4, "traffic on one replica")
        bot = Paused(lab, "launched", tmp_path)  # the new replica is launched, not yet ready
        [old, new] = lab.engines()
        assert old.id == first.id and new.labels["replica"] == "1"
        assert workers(url) == {url_of(lab, first)}  # not in the router while it starts
        done = bot.resume()
        assert "requests waiting on a replica" in scaled(done, 1, 2)
        assert workers(url) == {url_of(lab, u) for u in lab.engines()}
        assert actions_done(done.stdout) == {"start": 1}  # it joined its router as it started
        load.more(4, "traffic on two replicas")
        again = lab.reconcile()  # still queueing on two of them: a third
        assert "requests waiting on a replica" in scaled(again, 2, 3)
        load.more(4, "traffic on three replicas")
    assert load.failed == []
    assert len(lab.engines()) == 3
    assert workers(url) == {url_of(lab, u) for u in lab.engines()}
    events = scaling(lab)["events"]
    assert [(e["from"], e["to"]) for e in events] == [(1, 2), (2, 3)]
    assert all(e["waiting"] > 1 and "waiting" in e["reason"] for e in events), events
    assert events[1]["serving"] == 2 and events[1]["arrival_rps"] > 0


def test_scale_down_under_load_drains_the_leaving_replica(lab: ElasticLab, tmp_path: Path) -> None:
    lab.release(2, 3)
    lab.reconcile()
    url = lab.endpoint()
    [kept, leaving] = lab.engines()
    lab.release(1, 3)  # git lowers the bounds: the bot may go down to one
    with busy(url, 1) as load:
        load.more(2, "traffic before the scale-down")
        bot = Paused(lab, "after-roll", tmp_path)  # decided; the replica still serves
        direct = f"{url_of(lab, leaving)}/v1"
        with ThreadPoolExecutor(3) as pool:
            streams: list[Future[str]] = [
                pool.submit(ask, direct, 400, "chat-8b", 60, True, f"{n} in flight")
                for n in range(3)
            ]
            wait_for(
                lambda: running(lab, leaving) >= 2, timeout=30, what="streams on the leaving one"
            )
            done = bot.resume()
            answers = [s.result() for s in streams]  # raises if a stream was cut
        load.more(2, "traffic after the scale-down")
    assert load.failed == []
    assert all(answers)  # each streamed to its end: a cut stream raises instead
    assert scaled(done, 2, 1) == "no request waiting"
    assert f"drain {leaving.id} on localhost (up to 30s)" in done.stderr
    assert actions_done(done.stdout) == {"drain": 1, "router-remove": 1, "stop": 1}
    assert [u.id for u in lab.engines()] == [kept.id]
    assert workers(url) == {url_of(lab, kept)}


def running(lab: ElasticLab, unit: UnitRecord) -> float:
    """Requests the engine works on now (its metrics' running gauge)."""
    with urllib.request.urlopen(url_of(lab, unit) + "/metrics", timeout=5) as answer:
        text = answer.read().decode()
    found = [
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("vllm:num_requests_running")
    ]
    return sum(found)


def scale_to_two(lab: ElasticLab) -> None:
    """1–3 replicas, scaled to 2 by the bot under load; down only after an hour."""
    lab.policy(down="1h")
    lab.release(1, 3)
    lab.reconcile()
    with busy(lab.endpoint(), 6) as load:
        load.more(3, "traffic on one replica")
        scaled(lab.reconcile(), 1, 2)
    assert load.failed == []


def test_a_count_inside_the_bounds_is_not_drift(lab: ElasticLab) -> None:
    scale_to_two(lab)
    plan = lab.json("plan")
    changes = [a for a in plan["actions"] if a["kind"] != "keep"]
    assert changes == [], changes
    shown = lab.denv("plan")
    assert "— replicas 2 (1–3) —" in shown.stdout, shown.stdout
    assert "No changes" in shown.stdout
    row = lab.deployment()
    assert (row["replicas"], row["ready"], row["drift"]) == (2, 2, ""), row
    quiet = lab.reconcile("--drain", "5s")  # the bot, without load: its delay holds the count
    assert "planned +0 ~0 -0 =3" in quiet.stdout


def test_a_bot_killed_mid_scale_converges_from_the_fleets(lab: ElasticLab) -> None:
    scale_to_two(lab)
    decided = scaling(lab)["events"]
    url = lab.endpoint()
    before = {u.id: u.pid for u in lab.engines()}
    with busy(url, 10) as load:
        load.more(4, "traffic on two replicas")
        killed = lab.reconcile(fault="launched", ok=False)  # 2 → 3: one launched, then killed
        assert killed.returncode == -signal.SIGKILL, killed.stdout + killed.stderr
        assert len(lab.engines()) == 3
        done = lab.reconcile()
        load.more(4, "traffic after the restart")
    assert load.failed == []
    live = [u for u in lab.units() if u.alive]
    ids = [u.id for u in live]
    assert len(ids) == len(set(ids)) == 4, ids  # three engines and the router, once each
    gpus = [g for u in live for g in u.gpus]
    assert len(gpus) == len(set(gpus)) == 3
    engines = lab.engines()
    assert {u.id: u.pid for u in engines if u.id in before} == before  # none lost or restarted
    assert workers(url) == {url_of(lab, u) for u in engines}
    assert "start" not in actions_done(done.stdout)  # no duplicate of the launched one
    events = scaling(lab)["events"]
    assert events[: len(decided)] == decided  # the history the killed bot had, carried on
    assert all(1 <= e["to"] <= 3 for e in events)


def test_pending_capacity_is_shown_and_given_up_when_traffic_falls(small_lab: ElasticLab) -> None:
    """A fleet of 2 GPUs under a stage of 1–4: the third replica never arrives. It is pending
    (not counted, not started), the two serve, and when the traffic falls the pending one goes
    with the first step down, beside down.step running ones (here the step is the pending one:
    one replica fewer is wanted)."""
    lab = small_lab
    lab.policy(down="1h")
    lab.release(1, 4)
    lab.reconcile()
    url = lab.endpoint()
    with busy(url, 10) as load:
        load.more(4, "traffic on one replica")
        scaled(lab.reconcile(), 1, 2)
        load.more(4, "traffic on two replicas")
        short = lab.reconcile()
        scaled(short, 2, 3)
        assert actions_done(short.stdout) == {}  # nothing to start it on
        assert len(lab.engines()) == 2
        assert scaling(lab)["count"] == 3
        again = lab.reconcile()  # the next bot: still short, the pending one asked for once
        assert f"scale {KEY}" not in again.stdout + again.stderr
        kept = scaling(lab)
        assert [(e["from"], e["to"]) for e in kept["events"]] == [(1, 2), (2, 3)]
        assert (kept["count"], kept["pending"]) == (3, 1)
        load.more(4, "traffic while one is pending")
    assert load.failed == []
    lab.policy(down="0s")  # the delays of a step down, as any step down has them, passed
    lab.repo.commit("scaling: no down delay")
    with busy(url, 1) as quiet:
        quiet.more(1, "light traffic")
        fell = lab.reconcile()
    assert scaled(fell, 3, 2) == "no request waiting; pending given up"
    assert actions_done(fell.stdout) == {}  # one step down: the pending one, the two run on
    assert len(lab.engines()) == 2
    kept = scaling(lab)
    assert (kept["count"], kept["pending"]) == (2, 0)


def test_a_rolling_update_keeps_the_count(lab: ElasticLab) -> None:
    scale_to_two(lab)
    before = {u.id: u.pid for u in lab.engines()}
    url = lab.endpoint()
    text = (lab.repo.path / "releases/chat-8b/denv.yaml").read_text()
    lab.repo.write("releases/chat-8b/denv.yaml", text.replace("max_batch: 2 }", "max_batch: 3 }"))
    lab.repo.commit("chat-8b: max_batch 3")
    with busy(url, 2) as load:
        load.more(2, "traffic before the roll")
        rolled = lab.reconcile("--drain", "60s")  # a stream ends however busy the machine
        load.more(2, "traffic after the roll")
    assert load.failed == []
    assert "~ replace" in rolled.stderr and "max_batch" in rolled.stderr, rolled.stderr
    after = {u.id: u.pid for u in lab.engines()}
    assert sorted(after) == sorted(before)  # the same two replicas, each replaced
    assert all(after[i] != before[i] for i in before)
    assert f"scale {KEY}" not in rolled.stdout + rolled.stderr
    row = lab.deployment()
    assert (row["replicas"], row["ready"], row["drift"]) == (2, 2, ""), row


def test_the_arrival_rate_over_a_replicas_capacity_scales_before_queues_build(
    lab: ElasticLab,
) -> None:
    """Predictive: the engines' request and token counters (kept in the note from one
    `--once` bot to the next) give the arrival rate and lengths; the simulator's capacity of
    one replica for them, at a tiny utilization, asks for more replicas while nothing waits."""
    lab.policy(down="1h", step=4, predictive=True, utilization=0.001)
    lab.release(1, 3, batch=64)  # room in the batch: nothing queues
    lab.reconcile()
    with busy(lab.endpoint(), 2) as load:
        load.more(2, "traffic")
        first = lab.reconcile()  # the counters' first read: no rate yet
        assert f"scale {KEY}" not in first.stdout + first.stderr
        load.more(2, "traffic since the first read")
        done = lab.reconcile()
    assert load.failed == []
    reason = scaled(done, 1, 3)
    assert " req/s over " in reason and reason.endswith(" per replica"), reason
    [event] = scaling(lab)["events"]
    assert event["waiting"] <= 1 and event["arrival_rps"] > 0  # not the reactive signal
    # a replica as the stage runs it (max_batch 64), not as the recipe alone (vLLM's default
    # batch), at the lengths the bot read and the policy's TTFT and ITL
    alone = alone_capacity(lab, event["input_length"], event["output_length"])
    assert alone is not None and 0 < event["capacity_rps"] < 0.8 * alone, (event, alone)
    assert len(lab.engines()) == 3


def alone_capacity(lab: ElasticLab, input_length: int, output_length: int) -> float | None:
    """What one replica of the catalog's recipe (no override) holds at these lengths."""
    repo = lab.repo.source().repo_at(lab.repo.source().resolve())
    recipe = repo.recipes[RECIPE]
    hardware = repo.resolve_hardware("h200")
    assert hardware is not None
    policy = repo.policies.scaling["fast"]
    wanted = targets(policy, {})
    return replica_capacity(
        recipe, hardware, repo.models[recipe.model], input_length, output_length, wanted
    )
