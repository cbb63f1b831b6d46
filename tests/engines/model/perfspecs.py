"""Test helpers for the performance model, scheduler and predictions: the catalog's models and
hardware, and recipes built in code with just the levers a test turns."""

from __future__ import annotations

import functools
from typing import Any

from ruamel.yaml import YAML

from reconciler.engines.model.perf import PerfModel
from reconciler.engines.model.predict import sim_spec
from reconciler.spec.catalog import Hardware, HardwareFile, ModelArch, ModelsFile
from reconciler.spec.recipe import Recipe, Role
from tests.conftest import ROOT


@functools.cache
def _catalog() -> tuple[dict[str, ModelArch], dict[str, Hardware]]:
    yaml = YAML(typ="safe")
    models = ModelsFile.model_validate(yaml.load((ROOT / "catalog/models.yaml").read_text()))
    hw = HardwareFile.model_validate(yaml.load((ROOT / "catalog/hardware.yaml").read_text()))
    return {m.id: m for m in models.models}, {h.id: h for h in hw.hardware}


def model(key: str) -> ModelArch:
    return _catalog()[0][key]


def hardware(key: str) -> Hardware:
    return _catalog()[1][key]


def recipe(
    model_key: str = "llama-3.1-70b",
    hw: str = "h200",
    engine: str = "vllm",
    tp: int = 4,
    replicas: int = 1,
    topology: dict[str, Any] | None = None,
    **settings: Any,
) -> Recipe:
    """An aggregated TP recipe unless `topology` is given; `settings` are Settings fields."""
    version = "0.33.0" if engine == "vllm" else "0.5.23"
    return Recipe.model_validate(
        {
            "id": f"{model_key}/test@1",
            "model": model_key,
            "engine": {"name": engine, "version": version},
            "hardware": [hw],
            "topology": topology
            or {"mode": "aggregated", "replicas": replicas, "gpus": tp, "parallel": {"tp": tp}},
            "settings": settings,
        }
    )


def perf(
    model_key: str = "llama-3.1-70b",
    hw: str = "h200",
    role: Role = "aggregated",
    **kwargs: Any,
) -> PerfModel:
    r = recipe(model_key, hw, **kwargs)
    return PerfModel.from_spec(sim_spec(r, hardware(hw), model(model_key), role))
