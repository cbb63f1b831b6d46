"""Views: the overview (every release × stage × fleet) and a release's page (its stages as a
pipeline, promotions and rollbacks with their PRs, bake evidence, alarm history, elastic
deployments' replicas over time). They read
the last look (ui/state.py) and say things in the words of `denv status` and `denv rollout
status` (rollout/overview.py, rollout/status.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reconciler.rollout.overview import (
    Overview,
    drift_text,
    parity_line,
    ready_text,
    status_lines,
)
from reconciler.rollout.state import StageRecord
from reconciler.rollout.status import StageStatus
from reconciler.ui.charts import sparkline
from reconciler.ui.pulls import pr_link
from reconciler.ui.scaling import scaling_views
from reconciler.ui.site import NotFoundPage, Page
from reconciler.ui.state import UiState


def state_kind(words: str) -> str:
    """A state's class on the page (its colour and icon), from its words."""
    for prefix, kind in (
        ("baking", "baking"),
        ("baked", "baking"),
        ("green", "green"),
        ("rolled back", "bad"),
        ("rejected", "bad"),
        ("degraded", "bad"),
        ("deploying", "deploying"),
        ("waiting", "deploying"),
    ):
        if words.startswith(prefix):
            return kind
    return "idle"


def _record(state: UiState, release: str, stage: str) -> StageRecord | None:
    kept = state.overview.rollout if state.overview is not None else None
    return kept.stages.get(f"{release}/{stage}") if kept is not None else None


def _stage_row(
    state: UiState, release: str, status: StageStatus | None, stage: str
) -> dict[str, Any]:
    record = _record(state, release, stage)
    promotion = record.promotion if record is not None else None
    parity = state.overview.parity().get(f"{release}/{stage}") if state.overview else None
    return {
        "state": status.state if status is not None else "not deployed",
        "kind": state_kind(status.state) if status is not None else "idle",
        "promotion": status.promotion if status is not None else None,
        "promotion_pr": pr_link(state, promotion.number, promotion.url) if promotion else None,
        "promotion_state": promotion.state if promotion else None,
        "rollback_pr": pr_link(state, record.rollback_pr, record.rollback_url) if record else None,
        "alarms": status.alarms if status is not None else [],
        "note": status.note if status is not None else "",
        "errors": status.errors if status is not None else [],
        "parity": parity_line(f"{release}/{stage}", parity) if parity else None,
        "parity_bad": bool(parity and (parity.get("degraded") or parity["state"] == "error")),
    }


def overview(state: UiState, params: Mapping[str, str]) -> Page:
    seen = state.overview
    rows: list[dict[str, Any]] = []
    if seen is not None:
        found = {(r["release"], r["stage"], r["fleet"]): r for r in seen.rows}
        for release, spec in sorted(seen.repo.releases.items()):
            stages = {s.stage: s for s in seen.stages.get(release, [])}
            for stage in spec.stages:
                common = _stage_row(state, release, stages.get(stage.name), stage.name)
                for fleet in stage.fleets:
                    row = found.get((release, stage.name, fleet))
                    rows.append(
                        {
                            "key": f"{release}/{stage.name}/{fleet}",
                            "release": release,
                            "stage": stage.name,
                            "fleet": fleet,
                            "desired": row["desired_revision"] if row else None,
                            "running": row["running_revisions"] if row else [],
                            "ready": row["ready"] if row else None,
                            "replicas": row["replicas"] if row else 0,
                            "ready_text": ready_text(row) if row else "?",
                            "drift": drift_text(row) if row else "—",
                            "endpoint": row["endpoint"] if row else None,
                            **common,
                            **_state(seen.state_of(release, stage.name, fleet)),
                        }
                    )
    lines = status_lines(seen) if seen is not None else []
    return Page("overview.html", "Overview", {"rows": rows, "lines": lines})


def _state(words: str) -> dict[str, Any]:
    """A stage's state on a page: the words `denv status` uses (`Overview.state_of`) and its
    class."""
    return {"state": words, "kind": state_kind(words)}


def release(state: UiState, params: Mapping[str, str]) -> Page:
    name = params["name"]
    seen = state.overview
    if seen is None or name not in seen.repo.releases:
        raise NotFoundPage(f"no release '{name}'")
    spec = seen.repo.releases[name]
    statuses = {s.stage: s for s in seen.stages.get(name, [])}
    pins = seen.repo.promotions.get(name)
    stages = []
    for stage in spec.stages:
        record = _record(state, name, stage.name)
        history = state.history.get(f"{name}/{stage.name}", ())
        alarms = sorted({a for reading in history for a in reading.values})
        pin = pins.promotions.get(stage.name) if pins is not None else None
        common = _stage_row(state, name, statuses.get(stage.name), stage.name)
        stages.append(
            {
                "name": stage.name,
                "fleets": stage.fleets,
                "bake": stage.bake,
                "approvals": stage.approvals,
                "status": statuses.get(stage.name),
                "pin": pin,
                "pin_pr": pr_link(state, pin.pr) if pin is not None else None,
                "record": record,
                "evidence": record.evidence if record is not None else [],
                "scaling": scaling_views(seen, name, stage.name, stage.fleets),
                "charts": [
                    (alarm, sparkline([(r.at, r.values.get(alarm)) for r in history], alarm))
                    for alarm in alarms
                ],
                **common,
                **_state(_stage_state(seen, name, stage.name, stage.fleets, common["state"])),
            }
        )
    rejected = pins.rejected if pins is not None else []
    return Page(
        "release.html", f"Release {name}", {"name": name, "stages": stages, "rejected": rejected}
    )


def _stage_state(seen: Overview, release: str, stage: str, fleets: list[str], words: str) -> str:
    """A stage's state over its fleets: the first fleet's where it says more than the stage's
    own words (`deploying (start 3)`), else those words."""
    here = (seen.state_of(release, stage, fleet) for fleet in fleets)
    return next((found for found in here if found != words), words)


def releases(state: UiState) -> list[dict[str, str]]:
    """The release pages an export writes: one per release at the head."""
    return [{"name": name} for name in sorted(state.repo.releases)] if state.repo else []
