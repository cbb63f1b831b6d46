"""Models: a loaded denv repository — every file as validated models, and where each came
from, so problems found later still name file, line and field."""

from __future__ import annotations

from dataclasses import dataclass, field

from reconciler.errors import Problem
from reconciler.spec.catalog import Hardware, ModelArch, Offer
from reconciler.spec.fleet import Fleet
from reconciler.spec.policy import Policies
from reconciler.spec.recipe import Recipe
from reconciler.spec.release import Promotions, Release
from reconciler.spec.result import Result
from reconciler.spec.workload import WorkloadProfile
from reconciler.spec.yamlio import YamlDoc


@dataclass
class Repo:
    """Everything a denv repository declares, as validated models."""

    label: str
    hardware: dict[str, Hardware] = field(default_factory=dict)
    offers: list[Offer] = field(default_factory=list)
    models: dict[str, ModelArch] = field(default_factory=dict)
    workloads: dict[str, WorkloadProfile] = field(default_factory=dict)
    recipes: dict[str, Recipe] = field(default_factory=dict)
    fleets: dict[str, Fleet] = field(default_factory=dict)
    releases: dict[str, Release] = field(default_factory=dict)
    promotions: dict[str, Promotions] = field(default_factory=dict)
    policies: Policies = field(default_factory=Policies)
    results: list[Result] = field(default_factory=list)
    # Where each thing came from, for errors found after loading.
    docs: dict[str, YamlDoc] = field(default_factory=dict)
    origin: dict[str, str] = field(default_factory=dict)  # "recipe:<id>" etc. -> path
    result_lines: dict[str, tuple[str, int]] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    broken: set[str] = field(default_factory=set)  # "fleet:<name>" etc. whose file is invalid
    unread: set[str] = field(default_factory=set)  # "recipe:<id>" etc. of files not read (`only`)
    # what invalid files hold ("release:<name>", "ranking"...: spec/isolation.py), taken out
    # of the models above, with the problems that hold it; only the bot's reading fills it
    held: dict[str, tuple[Problem, ...]] = field(default_factory=dict)

    def resolve_hardware(self, key: str) -> Hardware | None:
        if key in self.hardware:
            return self.hardware[key]
        return next((hw for hw in self.hardware.values() if key in hw.aliases), None)

    def resolve_model(self, key: str) -> ModelArch | None:
        if key in self.models:
            return self.models[key]
        return next((arch for arch in self.models.values() if key in arch.aliases), None)

    def knows(self, kind: str, name: str) -> bool:
        """Defined, or defined by a file that is invalid (already reported there) or was
        not read (a command that reads only some files judges only those)."""
        key = f"{kind}:{name}"
        return key in self.origin or key in self.broken or key in self.unread

    def recipe_runs_on(self, recipe: Recipe, fleet: Fleet) -> bool:
        """Whether the recipe lists the fleet's hardware (by id or alias)."""
        wanted = self.resolve_hardware(fleet.hardware)
        listed = {hw.id for hw in map(self.resolve_hardware, recipe.hardware) if hw is not None}
        return wanted is None or wanted.id in listed

    def locate(self, path: str, loc: tuple[str | int, ...]) -> tuple[int, int]:
        doc = self.docs.get(path)
        return doc.position(loc) if doc is not None else (1, 1)

    def problem(
        self, path: str, loc: tuple[str | int, ...], message: str, warning: bool = False
    ) -> Problem:
        line, col = self.locate(path, loc)
        return Problem(path, line, col, message, warning)

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if not p.warning]
