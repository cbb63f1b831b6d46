"""Pure logic: the optimizer's search space — the candidates a release may become on a fleet,
only those that fit GPU memory, the fleet's NVLink domain and the GPU budget, and whose
settings the engine version accepts.

A candidate is a partial recipe over the release as it runs now: `engine`, `settings` (merged
into the release's overrides), `topology` (the release's, replaced whole) and, to run another
recipe for the model, `recipe` (its id). Its id is a digest of that partial recipe.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import random
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import TypeAdapter, ValidationError

from reconciler.catalog.cost import default_offer
from reconciler.catalog.deployments import deployments
from reconciler.errors import DenvError, NotFound
from reconciler.optimize import levers as lv
from reconciler.optimize.feasible import change_text, engine_refusal, memory_refusal, newer_versions
from reconciler.optimize.levers import Choices, Lever, SpecOption, Value
from reconciler.spec.catalog import Hardware, ModelArch
from reconciler.spec.checks import domain_size
from reconciler.spec.engines import engine_names
from reconciler.spec.fit import fit
from reconciler.spec.fleet import Fleet
from reconciler.spec.overrides import apply_overrides
from reconciler.spec.policy import OptimizerRules
from reconciler.spec.recipe import (
    AggregatedTopology,
    DisaggregatedTopology,
    EngineRef,
    Recipe,
    Topology,
    total_gpus,
)
from reconciler.spec.repo import Repo
from reconciler.spec.words import counted

_TOPOLOGY: TypeAdapter[AggregatedTopology | DisaggregatedTopology] = TypeAdapter(Topology)


@dataclass(frozen=True)
class Candidate:
    id: str  # 'c-' and 6 hex digits of the overrides' canonical JSON
    overrides: dict[str, Any]  # a partial recipe over the release as it runs now
    change: str  # for people: 'max_batch 64→256, tp 8→4, replicas 1→2'
    gpus: int  # every GPU the candidate's deployment uses (prefill included)
    choices: Mapping[str, Value] = field(default_factory=dict, compare=False)  # lever values

    def __hash__(self) -> int:
        return hash(self.id)


@dataclass(frozen=True)
class Infeasible:
    reason: str


@dataclass(frozen=True)
class Baseline:
    """The release as it runs on the fleet: its recipe, overrides and topology."""

    recipe: Recipe
    overrides: dict[str, Any] = field(default_factory=dict)
    topology: AggregatedTopology | DisaggregatedTopology | None = None


@dataclass(frozen=True)
class EngineOption:
    label: str  # the engine lever's choice: '<recipe id> <engine> <version>'
    recipe: Recipe
    engine: EngineRef


@dataclass(frozen=True)
class ReleaseEdit:
    """What the release's denv.yaml says once the candidate is promoted."""

    recipe: str
    overrides: dict[str, Any]
    topology: dict[str, Any] | None


class Suggests(Protocol):
    """What the space asks of an optuna trial (optuna.Trial satisfies it)."""

    def suggest_categorical(self, name: str, choices: Sequence[Any]) -> Any: ...


def candidate_id(overrides: Mapping[str, Any]) -> str:
    text = json.dumps(overrides, sort_keys=True, separators=(",", ":"))
    return "c-" + hashlib.sha256(text.encode()).hexdigest()[:6]


def _merge(base: Any, patch: Any) -> Any:
    if isinstance(base, dict) and isinstance(patch, dict):
        return {**base, **{k: _merge(base.get(k), v) for k, v in patch.items()}}
    return patch


class SearchSpace:
    """Levers over a baseline, and the checks every candidate passes."""

    def __init__(
        self,
        baseline: Baseline,
        *,
        hardware: Hardware,
        model: ModelArch,
        fleet: Fleet,
        domain: int,
        budget_gpus: int,
        rules: OptimizerRules,
        recipes: Mapping[str, Recipe],
        gpu_hour: float | None = None,
        levers: Collection[str] | None = None,
    ) -> None:
        self.baseline = baseline
        self.hardware, self.model, self.fleet = hardware, model, fleet
        self.domain, self.budget_gpus, self.rules = domain, budget_gpus, rules
        self.recipes = recipes
        self.gpu_hour = gpu_hour
        self.now = apply_overrides(baseline.recipe, baseline.overrides, baseline.topology)
        self.engines = self._engine_options()
        self.drafts = {o.method: o.draft_model for o in self._speculative_options()}
        self.levers = self._levers(set(_expand(levers)) if levers is not None else None)
        self._current_values = {
            **lv.current_values(self.now),
            lv.ENGINE: self.engines[0].label,
        }

    # ------------------------------------------------------------------ construction
    @classmethod
    def for_release(
        cls,
        repo: Repo,
        release: str,
        fleet: str,
        budget_gpus: int,
        rules: OptimizerRules,
        *,
        stage: str | None = None,
        levers: Collection[str] | None = None,
    ) -> SearchSpace:
        """The space of `release` (its `stage`, else its first stage on `fleet`)."""
        found = [
            d
            for d in deployments(repo)
            if d.release == release and d.fleet == fleet and stage in (None, d.stage)
        ]
        if not found:
            where = f"{release}/{stage}" if stage else release
            raise NotFound(f"release {where} runs nowhere on fleet {fleet} (or does not load)")
        body = repo.releases[release].release
        stage_spec = next(s for s in repo.releases[release].stages if s.name == found[0].stage)
        base = repo.recipes[repo.releases[release].recipe_for(stage_spec, fleet)]
        spec = repo.fleets[fleet]
        hardware = repo.resolve_hardware(spec.hardware)
        if hardware is None:
            raise NotFound(f"fleet {fleet}: unknown hardware '{spec.hardware}'")
        model = repo.models.get(base.model)
        if model is None:
            raise NotFound(f"recipe {base.id}: model {base.model} is not in catalog/models.yaml")
        price = spec.price.gpu_hour if spec.price else None
        offer = default_offer(hardware.id, repo.offers) if price is None else None
        return cls(
            Baseline(base, dict(body.overrides), body.topology),
            hardware=hardware,
            model=model,
            fleet=spec,
            domain=domain_size(repo, fleet) or hardware.scale_up.domain,
            budget_gpus=budget_gpus,
            rules=rules,
            recipes=repo.recipes,
            gpu_hour=price if price is not None else (offer.gpu_hour if offer else None),
            levers=levers if levers is not None else _default_levers(spec),
        )

    def _engine_options(self) -> list[EngineOption]:
        base, now = self.baseline.recipe, self.now
        options = [EngineOption(_label(base, now.engine), base, now.engine)]
        if not self.rules.allow_engine_change:
            return options
        others = [
            r
            for _, r in sorted(self.recipes.items())
            if r.model == base.model
            and r.id != base.id
            and r.engine.name in engine_names()
            and self.hardware.id in r.hardware
        ]
        for recipe, engine in [(base, now.engine)] + [(r, r.engine) for r in others]:
            for version in [engine.version, *newer_versions(engine.name, engine.version)]:
                ref = (
                    engine
                    if version == engine.version
                    else EngineRef(name=engine.name, version=version)
                )
                option = EngineOption(_label(recipe, ref), recipe, ref)
                if all(o.label != option.label for o in options):
                    options.append(option)
        return options

    def _speculative_options(self) -> list[SpecOption]:
        found = [SpecOption("ngram")]
        for _, recipe in sorted(self.recipes.items()):
            spec = recipe.settings.speculative
            new = all(o.method != spec.method for o in found)
            if recipe.model == self.model.id and spec.method not in ("none", "ngram") and new:
                found.append(SpecOption(spec.method, spec.draft_model))
        return found

    def _levers(self, wanted: set[str] | None) -> list[Lever]:
        now = self.now
        values = {**lv.current_values(now), lv.ENGINE: self.engines[0].label}
        budget = self.budget_gpus
        tps = lv.powers_of_two(min(self.domain, budget))
        moe = bool(self.model.experts)

        def pick(value: Value, others: Sequence[Value]) -> tuple[Value, ...]:
            return lv.unique([value, *others])

        levers = [
            Lever(lv.ENGINE, tuple(o.label for o in self.engines)),
            Lever(lv.MODE, pick(now.topology.mode, ["aggregated", "disaggregated"])),
            Lever(lv.LAYOUT, pick(values[lv.LAYOUT], lv.layouts(tps, budget)), "aggregated"),
            Lever(
                lv.PREFILL,
                pick(values[lv.PREFILL], lv.layouts(tps, budget - 1)),
                "disaggregated",
            ),
            Lever(lv.DECODE, pick(values[lv.DECODE], lv.layouts(tps, budget - 1)), "disaggregated"),
            Lever(lv.EP, pick(values[lv.EP], [False, True]) if moe else ()),
            Lever(lv.DP_ATTENTION, pick(values[lv.DP_ATTENTION], [False, True]) if moe else ()),
            Lever(lv.MAX_BATCH, pick(values[lv.MAX_BATCH], lv.MAX_BATCH_CHOICES)),
            Lever(
                lv.MAX_BATCHED_TOKENS,
                pick(values[lv.MAX_BATCHED_TOKENS], lv.BATCHED_TOKEN_CHOICES),
            ),
            # Unset is the engines' default, on: only switching it off is a new choice.
            Lever(
                lv.CHUNKED_PREFILL,
                pick(values[lv.CHUNKED_PREFILL], [True, False])
                if values[lv.CHUNKED_PREFILL] is not None
                else (None, False),
            ),
            Lever(lv.CUDA_GRAPHS, pick(values[lv.CUDA_GRAPHS], [True, False])),
            Lever(
                lv.SPECULATIVE,
                lv.speculative_choices(str(values[lv.SPECULATIVE]), self._speculative_options()),
            ),
            Lever(lv.KV_DTYPE, pick(values[lv.KV_DTYPE], ["auto", "fp8"])),
            Lever(lv.PREFIX_CACHING, pick(values[lv.PREFIX_CACHING], [True, False])),
            Lever(lv.KV_OFFLOAD, pick(values[lv.KV_OFFLOAD], ["none", "cpu"])),
            Lever(
                lv.QUANTIZATION,
                pick(values[lv.QUANTIZATION], list(self.rules.allow_quantization)),
            ),
        ]
        if self.budget_gpus < 2:
            levers = [lever for lever in levers if lever.name != lv.MODE]
        # A lever with one choice stays when that choice moves off the current value.
        return [
            lever
            for lever in levers
            if lever.choices
            and (len(lever.choices) > 1 or lever.choices[0] != values.get(lever.name))
            and (wanted is None or lever.name in wanted)
        ]

    # ------------------------------------------------------------------ the API
    def current(self) -> Candidate:
        """The release as it runs now: the baseline every candidate is measured against."""
        return Candidate(
            candidate_id({}), {}, "current", total_gpus(self.now.topology), self._current_values
        )

    def suggest_values(self, trial: Suggests) -> dict[str, Value]:
        """One value per lever that applies, asked of the trial (mode first, so that only the
        mode's own topology levers are asked)."""
        values: dict[str, Value] = {}
        mode = self._current_values[lv.MODE]
        for lever in self.levers:
            if lever.mode is not None and lever.mode != values.get(lv.MODE, mode):
                continue
            values[lever.name] = trial.suggest_categorical(lever.name, list(lever.choices))
        return values

    def suggest(self, trial: Suggests) -> Candidate | None:
        """The trial's candidate; None when it is infeasible (the caller prunes it)."""
        built = self.build(self.suggest_values(trial))
        return built if isinstance(built, Candidate) else None

    def recipe_of(self, candidate: Candidate) -> Recipe:
        """The resolved recipe a candidate runs."""
        return self.recipe_of_edit(self.release_edit(candidate))

    def recipe_of_edit(self, edit: ReleaseEdit) -> Recipe:
        """The resolved recipe a release edit (a candidate's, as its row keeps it) runs."""
        topology = _TOPOLOGY.validate_python(edit.topology) if edit.topology else None
        return apply_overrides(self.recipes_by_id(edit.recipe), edit.overrides, topology)

    def release_edit(self, candidate: Candidate) -> ReleaseEdit:
        """The release's recipe, overrides and topology once the candidate is promoted."""
        ov = candidate.overrides
        recipe = ov.get("recipe", self.baseline.recipe.id)
        kept = self.baseline.overrides
        if recipe != self.baseline.recipe.id:  # engine and args belong to the old recipe
            kept = {k: v for k, v in kept.items() if k == "settings"}
        patch = {k: ov[k] for k in ("engine", "settings") if k in ov}
        topology = ov.get("topology")
        if topology is None and self.baseline.topology is not None:
            topology = self.baseline.topology.model_dump(mode="json", exclude_unset=True)
        return ReleaseEdit(recipe, _merge(kept, patch), topology)

    def recipes_by_id(self, recipe_id: str) -> Recipe:
        if recipe_id == self.baseline.recipe.id:
            return self.baseline.recipe
        return self.recipes[recipe_id]

    def size(self) -> int:
        """How many lever combinations there are, feasible or not."""
        total = 0
        for mode in self._modes():
            n = 1
            for lever in self._active(mode):
                n *= len(lever.choices)
            total += n
        return total

    def grid(self, limit: int | None = None) -> Iterator[Candidate]:
        """Every feasible candidate, each once, in lever order (the last lever turns fastest)."""
        seen: set[str] = set()
        for mode in self._modes():
            active = self._active(mode)
            for combo in itertools.product(*(lever.choices for lever in active)):
                values: dict[str, Value] = {lv.MODE: mode}
                values.update(zip((lever.name for lever in active), combo, strict=True))
                built = self.build(values)
                if isinstance(built, Candidate) and built.id not in seen:
                    seen.add(built.id)
                    yield built
                    if limit is not None and len(seen) >= limit:
                        return

    def sample(self, count: int, seed: int = 0) -> list[Candidate]:
        """Up to `count` distinct feasible candidates drawn at random (for spaces too large
        for the grid)."""
        rng = random.Random(seed)
        found: dict[str, Candidate] = {}
        for _ in range(count * 30):
            if len(found) >= count:
                break
            mode = rng.choice(self._modes())
            values: dict[str, Value] = {lv.MODE: mode}
            values.update({lever.name: rng.choice(lever.choices) for lever in self._active(mode)})
            built = self.build(values)
            if isinstance(built, Candidate):
                found.setdefault(built.id, built)
        return list(found.values())

    def _modes(self) -> list[str]:
        mode = next((lever for lever in self.levers if lever.name == lv.MODE), None)
        return [str(m) for m in mode.choices] if mode else [str(self._current_values[lv.MODE])]

    def _active(self, mode: str) -> list[Lever]:
        return [
            lever for lever in self.levers if lever.name != lv.MODE and lever.mode in (None, mode)
        ]

    # ------------------------------------------------------------------ one candidate
    def build(self, choices: Choices) -> Candidate | Infeasible:
        """The candidate the choices name (levers left out keep the current value), or why
        it cannot run."""
        unknown = self._off_levers(choices)
        if unknown:
            return Infeasible(unknown)
        values = {**self._current_values, **choices}
        option = next((o for o in self.engines if o.label == values[lv.ENGINE]), None)
        if option is None:
            return Infeasible(f"unknown engine choice {values[lv.ENGINE]!r}")
        try:
            topology = lv.topology_of(values)
        except ValueError as exc:
            return Infeasible(f"topology: {_first_error(exc)}")
        gpus = total_gpus(topology)
        if gpus > self.budget_gpus:
            return Infeasible(f"needs {counted(gpus, 'GPU')}; the budget is {self.budget_gpus}")
        unfit = fit(topology, self.fleet, self.domain)
        if unfit:
            return Infeasible(unfit[0])
        ref = self._reference(option)
        overrides: dict[str, Any] = {}
        if option.recipe.id != self.baseline.recipe.id:
            overrides["recipe"] = option.recipe.id
        if option.engine != ref.engine:
            overrides["engine"] = option.engine.model_dump(mode="json", exclude_none=True)
        settings = lv.settings_patch(values, ref.settings, self.drafts)
        if settings:
            overrides["settings"] = settings
        if topology != ref.topology:
            overrides["topology"] = topology.model_dump(mode="json", exclude_defaults=True)
        candidate = Candidate(candidate_id(overrides), overrides, "", gpus, dict(choices))
        try:
            recipe = self.recipe_of(candidate)
        except ValidationError as exc:
            return Infeasible(_first_error(exc))
        reason = engine_refusal(recipe, self.fleet) or memory_refusal(
            recipe, self.hardware, self.model
        )
        if reason:
            return Infeasible(reason)
        change = change_text(self.now, recipe) or "current"
        return Candidate(candidate.id, overrides, change, gpus, dict(choices))

    def _off_levers(self, choices: Choices) -> str | None:
        """Why a choice lies outside the space: a value no lever offers."""
        levers = {lever.name: lever for lever in self.levers}
        for name, value in choices.items():
            lever = levers.get(name)
            if lever is None:
                if value != self._current_values.get(name):
                    return f"{name} is not searched (it stays {self._current_values.get(name)!r})"
            elif not lv.offers(lever, value):
                shown = ", ".join(map(repr, lever.choices))
                return f"{name} {value!r} is not a choice ({shown})"
        return None

    def _reference(self, option: EngineOption) -> Recipe:
        """The recipe of an engine option before any lever moves: the current one, or the
        other recipe with the release's settings overrides."""
        if option.recipe.id == self.baseline.recipe.id:
            return self.now
        kept = {k: v for k, v in self.baseline.overrides.items() if k == "settings"}
        try:
            return apply_overrides(option.recipe, kept, self.baseline.topology)
        except ValidationError:
            return option.recipe


def _label(recipe: Recipe, engine: EngineRef) -> str:
    return f"{recipe.id} {engine.name} {engine.version}"


def _first_error(exc: ValueError) -> str:
    if isinstance(exc, ValidationError):
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"])
        return f"{where}: {error['msg']}" if where else str(error["msg"])
    return str(exc)


def _expand(names: Collection[str]) -> list[str]:
    out: list[str] = []
    for name in names:
        if name in lv.GROUPS:
            out += lv.GROUPS[name]
        elif name in lv.ALL_LEVERS:
            out.append(name)
        else:
            known = ", ".join([*lv.GROUPS, *lv.ALL_LEVERS])
            raise DenvError(f"unknown lever '{name}' (known: {known})")
    return out


def _default_levers(fleet: Fleet) -> list[str] | None:
    """Every lever; on a simulated fleet, not KV offload, which the simulator does not model
    (its trials would measure nothing)."""
    if not fleet.simulated:
        return None
    return [name for name in lv.ALL_LEVERS if name != lv.KV_OFFLOAD]
