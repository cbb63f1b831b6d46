"""A canary whose stage names only a latency alarm, baking under load, one of its two
engines failing every request: the default error-rate alarm sees it and the bake rolls back
(here: rejects the revision, there is none before it), as an alarm the stage named would.
A local fleet of simulated engines behind the real sglang-router, load from the openai
client, the fault set through the simulator's faults API."""

from __future__ import annotations

import time

from tests.e2e.load import light_load
from tests.faults.health import fault, lab, passes_until, stage, url_of
from tests.labs.elastic_local import FLEET, ElasticLab
from tests.labs.release import release_yaml
from tests.labs.release import stage as stage_lines
from tests.reconcile.conftest import git_repo

__all__ = ["git_repo", "lab"]  # the fixtures


# The only alarm the stage names: a latency it never reaches.
def test_failed_requests_fire_the_default_error_rate_alarm(lab: ElasticLab) -> None:
    canary = stage_lines("canary", FLEET, "bake: 5m", "alarms: [ttft-slow]")
    lab.repo.write("releases/chat-8b/denv.yaml", release_yaml(canary, replicas=2))
    revision = lab.repo.commit("chat-8b: a canary watching its latency only")
    passes_until(lab, lambda: stage(lab, "canary").get("phase") == "baking", "the bake")
    [broken, _] = lab.engines()
    with light_load(lab.endpoint(), workers=4, distinct=True) as load:
        load.more(10, "requests answered before the fault")
        faulted = time.monotonic()
        fault(url_of(lab, broken), error_rate=1.0)
        passes = passes_until(
            lab,
            lambda: stage(lab, "canary").get("phase") in ("rolled back", "rejected"),
            "the error-rate alarm's rollback",
            most=12,
        )
        decided = time.monotonic() - faulted
    record = stage(lab, "canary")
    print(f"rolled back {decided:.1f} s after the fault, {passes} passes; {record['reason']}")
    assert record["rolled_back"] == revision
    assert "error_rate" in record["reason"], record
    [reading] = [a for a in record["alarms"] if a["name"] == "error-rate"]
    assert reading["firing"], record["alarms"]
    assert sorted(a["name"] for a in record["alarms"]) == ["error-rate", "ttft-slow"]
