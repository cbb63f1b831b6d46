"""Views: an elastic deployment on a release's page — its count within git's bounds
(`4 (1–8)`), why, and its scaling history: replicas over time against the arrival rate, and
each decision with the signal values that caused it, as `denv status --events` lists them
(rollout/scaled.py, from the bots' lease notes)."""

from __future__ import annotations

from typing import Any

from reconciler.rollout.overview import Overview
from reconciler.rollout.scaled import signal_words
from reconciler.ui.charts import replicas_chart

SHOWN = 20  # decisions listed under the chart (the chart draws every one the notes keep)


def scaling_views(
    seen: Overview, release: str, stage: str, fleets: list[str]
) -> list[dict[str, Any]]:
    """One view per elastic deployment of the stage (a fixed count has none)."""
    rows = {(r["release"], r["stage"], r["fleet"]): r for r in seen.rows}
    events = seen.scale_events()
    views = []
    for fleet in fleets:
        row = rows.get((release, stage, fleet))
        if row is None or row["bounds"] is None:
            continue
        key = f"{release}/{stage}/{fleet}"
        mine = [e for e in events if e["deployment"] == key]
        # the count before the first decision, each decision's, and the one kept now
        steps = [(e["at"], e["from"]) for e in mine[:1]] + [(e["at"], e["to"]) for e in mine]
        steps.append((seen.at, row["replicas"] + row["pending_replicas"]))
        scaling = row["scaling"]
        now = ((scaling or {}).get("signals") or {}).get("arrival_rps")
        load = [(e["at"], e["arrival_rps"]) for e in mine if _number(e.get("arrival_rps"))]
        load += [(seen.at, now)] if _number(now) else []
        views.append(
            {
                "key": key,
                "fleet": fleet,
                "scale": row["scale"],
                "reason": scaling["reason"] if scaling else None,
                "chart": replicas_chart(steps, load, key),
                "events": [{**e, "said": signal_words(e)} for e in mine[-SHOWN:]],
            }
        )
    return views


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
