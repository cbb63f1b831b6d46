"""Requests a stage's router refuses between two revisions are seen: the routers' windows run
from the last pass before a roll, not from the moment the new revision is ready. A canary
baking revision A, both its engines then failing every request, clients refused through the
real sglang-router; a new revision B is committed and rolls out in the next pass. Before,
B's window started fresh once it was ready and A's was never read again: the refusals
counted nowhere. A local fleet of simulated engines, load from the openai client."""

from __future__ import annotations

from tests.e2e.load import light_load
from tests.engines.sim.sims import wait_until
from tests.faults.health import fault, lab, passes_until, stage, url_of
from tests.labs.elastic_local import FLEET, ElasticLab
from tests.labs.release import release_yaml
from tests.labs.release import stage as stage_lines
from tests.reconcile.conftest import git_repo

__all__ = ["git_repo", "lab"]  # the fixtures

REFUSED = 60  # more than the default error-rate alarm's min_requests (50)


def test_refusals_before_a_roll_count_for_the_revision_rolling_out(lab: ElasticLab) -> None:
    canary = stage_lines("canary", FLEET, "bake: 5m", "alarms: [ttft-slow]")
    lab.repo.write("releases/chat-8b/denv.yaml", release_yaml(canary, replicas=2))
    lab.repo.commit("chat-8b: revision A")
    passes_until(lab, lambda: stage(lab, "canary").get("phase") == "baking", "A's bake")
    for engine in lab.engines():
        fault(url_of(lab, engine), error_rate=1.0)
    with light_load(lab.endpoint(), workers=4, distinct=True) as load:
        wait_until(lambda: len(load.failed) >= REFUSED, 60, f"{REFUSED} refused requests")
    refused = len(load.failed)
    lab.repo.write("releases/chat-8b/denv.yaml", release_yaml(canary, replicas=2, batch=64))
    moved = lab.repo.commit("chat-8b: revision B")
    passes_until(lab, lambda: stage(lab, "canary").get("revision") == moved, "B's roll")
    record = stage(lab, "canary")
    [reading] = [a for a in record["alarms"] if a["name"] == "error-rate"]
    print(f"{refused} refused, {load.answered} answered; {reading['text']}; {record['phase']}")
    assert reading["value"] is not None, reading
    assert round(reading["value"] * reading["requests"]) >= refused, reading
    assert reading["firing"], reading
    assert record["phase"] in ("rolled back", "rejected"), record
    assert "error_rate" in record["reason"], record
