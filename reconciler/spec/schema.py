"""Pure logic: a JSON Schema per file kind, for editors (yaml-language-server) and tools."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from reconciler.spec.catalog import HardwareFile, ModelsFile, OffersFile
from reconciler.spec.fleet import FleetFile
from reconciler.spec.policy import AlarmsFile, GatesFile, OptimizerFile, PrPolicyFile
from reconciler.spec.recipe import RecipeFile
from reconciler.spec.release import Promotions, Release
from reconciler.spec.result import Result, TrafficLine
from reconciler.spec.scaling import ScalingFile
from reconciler.spec.workload import WorkloadsFile

FILE_KINDS: dict[str, tuple[type[BaseModel], str]] = {
    "recipe": (RecipeFile, "recipes/<model>/<name>@<rev>.yaml"),
    "fleet": (FleetFile, "fleets/<name>.yaml"),
    "release": (Release, "releases/<name>/denv.yaml"),
    "promotions": (Promotions, "releases/<name>/promotions.yaml"),
    "hardware": (HardwareFile, "catalog/hardware.yaml"),
    "offers": (OffersFile, "catalog/offers.yaml"),
    "models": (ModelsFile, "catalog/models.yaml"),
    "workloads": (WorkloadsFile, "catalog/workloads.yaml"),
    "alarms": (AlarmsFile, "policies/alarms.yaml"),
    "gates": (GatesFile, "policies/gates.yaml"),
    "optimizer": (OptimizerFile, "policies/optimizer.yaml"),
    "pr": (PrPolicyFile, "policies/pr.yaml"),
    "scaling": (ScalingFile, "policies/scaling.yaml"),
    "result": (Result, "results/<recipe>/<hardware>/<id>.json, results/published/*.jsonl lines"),
    "traffic": (TrafficLine, "a line of a traffic shape (.jsonl)"),
}


def schema_for(kind: str) -> dict[str, Any]:
    model, where = FILE_KINDS[kind]
    schema = model.model_json_schema(mode="validation")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = f"denv {kind}"
    schema["description"] = f"denv {kind} file: {where}"
    return schema
