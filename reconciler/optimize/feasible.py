"""Pure logic: the checks a candidate recipe passes before the optimizer considers it — the
engine version accepts its settings and layout, its weights leave room for KV cache in GPU
memory — and its difference from the current recipe in words."""

from __future__ import annotations

from typing import Any

from reconciler.engines.base import version_key
from reconciler.engines.cards import card
from reconciler.engines.model.perf import PerfModel
from reconciler.engines.model.predict import sim_spec
from reconciler.engines.versions import known_versions
from reconciler.errors import DenvError, EngineError
from reconciler.spec.catalog import Hardware, ModelArch
from reconciler.spec.fleet import Fleet
from reconciler.spec.recipe import AggregatedTopology, Recipe, describe_topology


def newer_versions(engine: str, version: str) -> list[str]:
    """Versions of the engine with a flag table newer than `version`, oldest first."""
    try:
        floor = version_key(version)
    except EngineError:
        return []
    return [v for v in known_versions(engine) if version_key(v) > floor]


def engine_refusal(recipe: Recipe, fleet: Fleet) -> str | None:
    """Why the engine version cannot run the recipe's settings, layout and args; None when
    it can (the engine card's check; denv's own simulator engine takes everything)."""
    largest_host = max((host.gpus for host in fleet.hosts), default=1) or 1
    try:
        card(recipe.engine.name).check_recipe(recipe, largest_host)
    except EngineError as exc:
        return str(exc)
    return None


def memory_refusal(recipe: Recipe, hardware: Hardware, model: ModelArch) -> str | None:
    """Why the weights leave no GPU memory for KV cache (the simulator's memory model, the
    one `denv sim predict` uses); None when they fit."""
    for role, _ in recipe.topology.pools():
        try:
            PerfModel.from_spec(sim_spec(recipe, hardware, model, role))
        except DenvError as exc:
            return str(exc)
    return None


# ------------------------------------------------------------------ the change in words
_PARALLEL = ("tp", "pp", "dp", "ep", "dp_attention")


def change_text(old: Recipe, new: Recipe) -> str:
    """'max_batch 64→256, tp 8→4, replicas 1→2'; empty when nothing changes."""
    parts: list[str] = []
    if old.id != new.id:
        parts.append(f"recipe {old.id}→{new.id}")
    if (old.engine.name, old.engine.version) != (new.engine.name, new.engine.version):
        parts.append(
            f"{old.engine.name} {old.engine.version}→{new.engine.name} {new.engine.version}"
        )
    parts += _topology_change(old, new)
    before = flatten(old.settings.model_dump(exclude={"speculative"}))
    after = flatten(new.settings.model_dump(exclude={"speculative"}))
    for key in after:
        if before.get(key) != after[key]:
            parts.append(f"{key} {_shown(before.get(key))}→{_shown(after[key])}")
    spec_old, spec_new = _speculative(old), _speculative(new)
    if spec_old != spec_new:
        parts.append(f"speculative {spec_old}→{spec_new}")
    return ", ".join(parts)


def _topology_change(old: Recipe, new: Recipe) -> list[str]:
    a, b = old.topology, new.topology
    if a == b:
        return []
    if isinstance(a, AggregatedTopology) and isinstance(b, AggregatedTopology):
        parts = [
            f"{name} {_shown(getattr(a.parallel, name))}→{_shown(getattr(b.parallel, name))}"
            for name in _PARALLEL
            if getattr(a.parallel, name) != getattr(b.parallel, name)
        ]
        if a.replicas != b.replicas:
            parts.append(f"replicas {a.replicas}→{b.replicas}")
        return parts
    return [f"{describe_topology(a)} → {describe_topology(b)}"]


def flatten(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested maps as dotted names: {"kv_cache": {"dtype": "fp8"}} → {"kv_cache.dtype": "fp8"}."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict):
            out.update(flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _speculative(recipe: Recipe) -> str:
    spec = recipe.settings.speculative
    return "off" if spec.method == "none" else f"{spec.method} ×{spec.draft_tokens}"


def _shown(value: Any) -> str:
    if value is None:
        return "default"
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)
