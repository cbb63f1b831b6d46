"""A canary whose stage names only a latency alarm, baking under load: one of its two
engines failing every request, or killed, and the default error-rate alarm sees what its
clients were refused; the bake rolls back (here: rejects the revision, there is none before
it), as an alarm the stage named would. A local fleet of simulated engines behind the real
sglang-router, load from the openai client, the fault set through the simulator's faults
API or a SIGKILL."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable

import pytest

from reconciler.fleet.model.observed import UnitRecord
from tests.e2e.load import light_load
from tests.faults.health import fault, lab, passes_until, stage, url_of
from tests.labs.elastic_local import FLEET, ElasticLab
from tests.labs.release import release_yaml
from tests.labs.release import stage as stage_lines
from tests.reconcile.conftest import git_repo

__all__ = ["git_repo", "lab"]  # the fixtures


def failing(lab: ElasticLab, engine: UnitRecord) -> None:
    fault(url_of(lab, engine), error_rate=1.0)


def killed(lab: ElasticLab, engine: UnitRecord) -> None:
    assert engine.pid is not None
    os.kill(engine.pid, signal.SIGKILL)


@pytest.mark.parametrize("hurt", [failing, killed], ids=["engine-errors", "engine-killed"])
def test_failed_requests_fire_the_default_error_rate_alarm(
    lab: ElasticLab, hurt: Callable[[ElasticLab, UnitRecord], None]
) -> None:
    canary = stage_lines("canary", FLEET, "bake: 5m", "alarms: [ttft-slow]")
    lab.repo.write("releases/chat-8b/denv.yaml", release_yaml(canary, replicas=2))
    revision = lab.repo.commit("chat-8b: a canary watching its latency only")
    passes_until(lab, lambda: stage(lab, "canary").get("phase") == "baking", "the bake")
    [broken, _] = lab.engines()
    with light_load(lab.endpoint(), workers=4, distinct=True) as load:
        load.more(50, "requests answered before the fault")
        faulted = time.monotonic()
        hurt(lab, broken)
        passes = passes_until(
            lab,
            lambda: stage(lab, "canary").get("phase") in ("rolled back", "rejected"),
            "the error-rate alarm's rollback",
            most=12,
        )
        decided = time.monotonic() - faulted
    record = stage(lab, "canary")
    print(
        f"{hurt.__name__}: rolled back {decided:.1f} s after the fault, {passes} passes, "
        f"{len(load.failed)} of {load.answered + len(load.failed)} requests failed; "
        f"{record['reason']}"
    )
    assert load.failed
    assert record["rolled_back"] == revision
    assert "error_rate" in record["reason"], record
    [reading] = [a for a in record["alarms"] if a["name"] == "error-rate"]
    assert reading["firing"], record["alarms"]
    assert sorted(a["name"] for a in record["alarms"]) == ["error-rate", "ttft-slow"]
