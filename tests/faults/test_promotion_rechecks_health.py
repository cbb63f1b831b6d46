"""An approved promotion PR, and a canary replica killed before the bot's next pass: the
pass does not merge (the canary was green, and stays green, but is not ready), it says why
in the PR's check and in `rollout status`, and merges once the replica serves again. A
local fleet of simulated engines, the local forge, a signed approval."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from reconciler.forge.local import LocalForge
from reconciler.forge.models import PrState
from reconciler.rollout.promote import PROMOTION_CHECK
from tests.faults.health import lab, passes_until, stage
from tests.fleet.conftest import wait_for
from tests.forge.sshkeys import allow, new_key
from tests.labs.elastic_local import FLEET, ElasticLab
from tests.labs.release import release_yaml
from tests.labs.release import stage as stage_lines
from tests.reconcile.conftest import git_repo

__all__ = ["git_repo", "lab"]  # the fixtures


def test_an_approved_promotion_waits_while_its_stage_is_not_ready(
    lab: ElasticLab, tmp_path: Path
) -> None:
    key = new_key(tmp_path, "grace")
    allow(lab.repo.path, {"grace": key})
    stages = (
        stage_lines("canary", FLEET, "bake: 1s", "alarms: [ttft-slow]"),
        stage_lines("prod", FLEET, "approvals: 1"),
    )
    lab.repo.write("releases/chat-8b/denv.yaml", release_yaml(*stages, replicas=2))
    lab.repo.commit("chat-8b: canary, then prod on approval")
    passes_until(lab, lambda: bool(stage(lab, "canary").get("promotion")), "the promotion PR")
    number = stage(lab, "canary")["promotion"]["number"]
    forge = LocalForge(lab.repo.path)
    forge.approve(number, "grace", key=key)
    [victim, _] = [e for e in lab.engines() if e.labels.get("stage") == "canary"]
    assert victim.pid is not None
    os.kill(victim.pid, signal.SIGKILL)
    wait_for(
        lambda: not any(u.id == victim.id and u.alive for u in lab.units()),
        what="the replica's death seen by its agent",
    )
    killed = time.monotonic()
    lab.reconcile()
    assert forge.pull_request(number).state == PrState.OPEN
    promotion = stage(lab, "canary")["promotion"]
    assert promotion["blockers"] == [
        "waiting: canary is not ready (a replica is down or being replaced)"
    ]
    [check] = [
        c for c in forge.checks(forge.pull_request(number).head_sha) if c.name == PROMOTION_CHECK
    ]
    assert (check.conclusion, check.title) == ("failure", f"waiting: {promotion['held']}")
    shown = lab.denv("rollout", "status", "chat-8b")
    assert "canary is not ready" in shown.stdout, shown.stdout + shown.stderr
    passes = passes_until(
        lab, lambda: forge.pull_request(number).state == PrState.MERGED, "the merge"
    )
    print(f"merged {time.monotonic() - killed:.1f} s after the kill, {passes + 1} passes")
