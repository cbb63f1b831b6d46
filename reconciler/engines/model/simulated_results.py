"""Pure logic: the simulated results `denv bench` ranks where no published or measured one
matches — every recipe, on every hardware it names that its weights fit, on every workload
profile of catalog/workloads.yaml, at a few closed-loop concurrencies, predicted exactly as
`denv sim predict --workload W --concurrency C` would (virtual time, fixed seed).

They are precomputed by `scripts/simulate_results.py` into results/simulated/sim-predict.jsonl.
Each result's id ends in the digest of everything its figures follow from (recipe, hardware,
model, workload profile, loads, the simulator's fitted constants and SIM_VERSION), so a test
can tell a stale file without predicting again (docs/benchmarks.md, "Simulated rows").
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass

from reconciler.catalog.workloads import covered
from reconciler.engines.model import calibration, traffic
from reconciler.engines.model.perf import PerfModel, WeightsDoNotFit
from reconciler.engines.model.predict import PredictionError, predict, sim_spec
from reconciler.engines.model.stats import Prediction
from reconciler.spec.catalog import Hardware, ModelArch
from reconciler.spec.recipe import DisaggregatedTopology, Recipe, Role
from reconciler.spec.result import (
    Load,
    Result,
    ResultEngine,
    ResultRecipe,
    Source,
    Workload,
)
from reconciler.spec.workload import WorkloadProfile

# Bump when a change to the simulator's code changes its predictions: every row is then stale.
SIM_VERSION = 2  # 2: SGLang's admission and retraction as its 0.5.9 source has them
CONCURRENCIES = (1, 8, 64)
REQUESTS_PER_CLIENT = 3  # after one warm-up request per client; at least MIN_REQUESTS in all
MIN_REQUESTS = 32
PATH = "results/simulated/sim-predict.jsonl"


@dataclass(frozen=True)
class Target:
    """One recipe on one hardware for one workload profile: one simulated configuration."""

    recipe: Recipe
    hardware: Hardware
    model: ModelArch
    profile: WorkloadProfile

    @property
    def digest(self) -> str:
        return inputs_digest(self.recipe, self.hardware, self.model, self.profile)


def constants() -> dict[str, object]:
    """The simulator's fitted and assumed constants, as data."""
    return {
        "efficiency": {gen: asdict(e) for gen, e in calibration.EFFICIENCY.items()},
        "mtp_acceptance": calibration.MTP_ACCEPTANCE,
        "pd_handoff_s": calibration.PD_HANDOFF_S,
        "engine_kernel_scale": calibration.ENGINE_KERNEL_SCALE,
        "generation": calibration.GENERATION,
        "own_constants": sorted(calibration.OWN_CONSTANTS),
        "sim_version": SIM_VERSION,
    }


def inputs_digest(
    recipe: Recipe, hardware: Hardware, model: ModelArch, profile: WorkloadProfile
) -> str:
    """12 hex digits of sha256 over what the predictions follow from."""
    inputs = {
        "recipe": recipe.model_dump(mode="json"),
        "hardware": hardware.model_dump(mode="json"),
        "model": model.model_dump(mode="json"),
        "profile": profile.model_dump(mode="json", exclude={"description", "source"}),
        "loads": [CONCURRENCIES, REQUESTS_PER_CLIENT, MIN_REQUESTS],
        "constants": constants(),
    }
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:12]


def targets(
    recipes: Iterable[Recipe],
    hardware: Mapping[str, Hardware],
    models: Mapping[str, ModelArch],
    profiles: Sequence[WorkloadProfile],
    results: Sequence[Result],
) -> list[Target]:
    """Every recipe × hardware it names (and whose weights fit there) × profile, less those a
    published or measured result of the same recipe, hardware and profile already covers."""
    done = covered(results, profiles, lambda key: _hardware_id(key, hardware))
    out = []
    for recipe in sorted(recipes, key=lambda r: r.id):
        model = models.get(recipe.model)
        for key in recipe.hardware:
            hw = hardware.get(_hardware_id(key, hardware))
            if model is None or hw is None or not _fits(recipe, hw, model):
                continue
            out += [
                Target(recipe, hw, model, p)
                for p in profiles
                if (recipe.id, hw.id, p.id) not in done
            ]
    return out


def _hardware_id(key: str, hardware: Mapping[str, Hardware]) -> str:
    found = hardware.get(key)
    if found is None:
        found = next((h for h in hardware.values() if key.lower() in h.aliases), None)
    return found.id if found is not None else key


def _fits(recipe: Recipe, hardware: Hardware, model: ModelArch) -> bool:
    roles: tuple[Role, ...] = (
        ("prefill", "decode")
        if isinstance(recipe.topology, DisaggregatedTopology)
        else ("aggregated",)
    )
    try:
        for role in roles:
            PerfModel.from_spec(sim_spec(recipe, hardware, model, role))
    except WeightsDoNotFit:
        return False
    return True


def simulate(target: Target) -> list[Result]:
    """The target's predictions, one result per concurrency that any request fits."""
    out = []
    for concurrency in CONCURRENCIES:
        count = max((REQUESTS_PER_CLIENT + 1) * concurrency, MIN_REQUESTS)
        requests = traffic.workload(target.profile, count)
        try:
            prediction = predict(
                target.recipe, target.hardware, target.model, requests, concurrency
            )
        except PredictionError:
            continue
        out.append(_result(target, prediction, concurrency))
    return out


def result_id(target: Target, concurrency: int) -> str:
    name = target.recipe.id.replace("/", "-").replace("@", "-")
    return f"sim-{name}-{target.hardware.id}-{target.profile.id}-c{concurrency}-{target.digest}"


def digest_of(result: Result) -> str:
    """The inputs digest a simulated result's id ends in."""
    return result.id.rsplit("-", 1)[-1]


def _result(target: Target, p: Prediction, concurrency: int) -> Result:
    recipe, profile = target.recipe, target.profile
    settings = recipe.settings
    return Result(
        id=result_id(target, concurrency),
        model=recipe.model,
        precision=None if settings.quantization == "none" else settings.quantization,
        speculative=settings.speculative.method,
        recipe=ResultRecipe(id=recipe.id),
        engine=ResultEngine(name=recipe.engine.name, version=recipe.engine.version),
        hardware=target.hardware.id,
        gpus=p.gpus,
        topology=recipe.topology,
        workload=Workload(
            name=profile.id,
            isl=profile.generator.input.mean,
            osl=profile.generator.output.mean,
            prefix_reuse=profile.prefix_reuse,
            dataset=f"catalog/workloads.yaml {profile.id} generator",
        ),
        load=Load(concurrency=concurrency),
        metrics=p.metrics(),
        source=Source(
            kind="simulated",
            by="denv sim predict (scripts/simulate_results.py)",
            citation=f"inputs digest {target.digest}",
            notes=f"predicted by denv's performance model in virtual time: {p.requests} "
            f"requests after {p.warmup} warm-up; not measured on hardware (docs/simulator.md)",
        ),
    )
