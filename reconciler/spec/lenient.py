"""Pure: the names a release file (`releases/<name>/denv.yaml`) gives, read leniently — from
any commit in history, valid or not, where a broken file names nothing rather than stopping.

The one place that reads a release file without validating it: release revisions
(reconcile/history.py) follow the recipes it names, and the reconciler finds the fleets a
removed release may still run on (reconcile/source.py) from the fleets it names.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from reconciler.spec.yamlio import parse_yaml


@dataclass(frozen=True)
class ReleaseNames:
    recipes: tuple[str, ...] = ()  # the release's recipe and its stages' per-fleet ones, sorted
    fleets: tuple[str, ...] = ()  # its stages' fleets, sorted
    deployments: tuple[tuple[str, str], ...] = ()  # (stage, fleet) of each stage's fleets


@lru_cache(maxsize=256)  # history walks see the same blobs commit after commit
def release_names(data: bytes) -> ReleaseNames:
    """What the release file `data` names; nothing when it does not parse."""
    doc, problem = parse_yaml("denv.yaml", data)
    if doc is None or problem is not None or not isinstance(doc.data, dict):
        return ReleaseNames()
    recipes: set[str] = set()
    fleets: set[str] = set()
    pairs: set[tuple[str, str]] = set()
    body = doc.data.get("release")
    if isinstance(body, dict) and isinstance(body.get("recipe"), str):
        recipes.add(body["recipe"])
    stages = doc.data.get("stages")
    for stage in stages if isinstance(stages, list) else []:
        if not isinstance(stage, dict):
            continue
        per_fleet = stage.get("recipes")
        if isinstance(per_fleet, dict):
            recipes |= {r for r in per_fleet.values() if isinstance(r, str)}
        named = stage.get("fleets")
        if isinstance(named, list):
            fleets |= {f for f in named if isinstance(f, str)}
            if isinstance(stage.get("name"), str):
                pairs |= {(stage["name"], f) for f in named if isinstance(f, str)}
    return ReleaseNames(tuple(sorted(recipes)), tuple(sorted(fleets)), tuple(sorted(pairs)))
