"""Pure logic: a release's overrides applied to its recipe.

Overrides are a partial recipe (engine, settings, args); every key must name a field the
recipe has, so a typo is an error at its line rather than a setting silently ignored.
"""

from __future__ import annotations

from typing import Any, get_args

from pydantic import BaseModel

from reconciler.spec.recipe import AggregatedTopology, DisaggregatedTopology, Recipe

OVERRIDABLE = ("engine", "settings", "args")


def _model_of(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    models = [a for a in get_args(annotation) if isinstance(a, type) and issubclass(a, BaseModel)]
    return models[0] if len(models) == 1 else None


def unknown_fields(overrides: dict[str, Any]) -> list[tuple[tuple[str, ...], str]]:
    """(path, message) for each key that names no recipe field."""
    found: list[tuple[tuple[str, ...], str]] = []
    for key, value in overrides.items():
        if key not in OVERRIDABLE:
            found.append(
                (
                    (key,),
                    f"'{key}' cannot be overridden (only "
                    f"{', '.join(OVERRIDABLE)}; topology is a release field)",
                )
            )
            continue
        model = _model_of(Recipe.model_fields[key].annotation)
        if model is not None and isinstance(value, dict):
            found.extend(_walk(model, value, (key,)))
    return found


def _walk(
    model: type[BaseModel], data: dict[str, Any], at: tuple[str, ...]
) -> list[tuple[tuple[str, ...], str]]:
    found: list[tuple[tuple[str, ...], str]] = []
    for key, value in data.items():
        if key not in model.model_fields:
            known = ", ".join(model.model_fields)
            found.append(((*at, key), f"unknown field '{key}' (known: {known})"))
            continue
        nested = _model_of(model.model_fields[key].annotation)
        if nested is not None and isinstance(value, dict):
            found.extend(_walk(nested, value, (*at, key)))
    return found


def _merge(base: Any, patch: Any) -> Any:
    if isinstance(base, dict) and isinstance(patch, dict):
        return {**base, **{k: _merge(base.get(k), v) for k, v in patch.items()}}
    return patch


def apply_overrides(
    recipe: Recipe,
    overrides: dict[str, Any],
    topology: AggregatedTopology | DisaggregatedTopology | None,
) -> Recipe:
    """The recipe a release runs. Raises pydantic.ValidationError for bad override values."""
    # exclude_unset: a default stays a default, so engines can leave it to the engine
    merged = _merge(recipe.model_dump(exclude_unset=True), overrides)
    if topology is not None:
        merged["topology"] = topology.model_dump(exclude_unset=True)
    return Recipe.model_validate(merged)
