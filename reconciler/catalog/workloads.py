"""Pure logic: which results a workload profile (catalog/workloads.yaml) covers, and finding
a profile by name."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence

from reconciler.errors import UsageError
from reconciler.spec.result import Result
from reconciler.spec.workload import WorkloadProfile


def matches(profile: WorkloadProfile, result: Result, known: Collection[str] = ()) -> bool:
    """A result counts as the profile when its workload names the profile, or when its
    nominal input and output lengths both fall inside the profile's ranges. A result whose
    workload names another of the `known` profiles counts as that one only (a simulated rag
    row is not an agent row, though its lengths fall inside both)."""
    workload = result.workload
    name = workload.name.lower() if workload.name is not None else None
    if name == profile.id:
        return True
    if name is not None and name in known:
        return False
    if workload.isl is None or workload.osl is None:
        return False
    return profile.input_tokens.contains(workload.isl) and profile.output_tokens.contains(
        workload.osl
    )


def profile_for(name: str, profiles: Sequence[WorkloadProfile]) -> WorkloadProfile:
    """The profile called `name` (any case); UsageError listing the known ones otherwise."""
    wanted = name.strip().lower()
    for profile in profiles:
        if profile.id == wanted:
            return profile
    known = ", ".join(profile.id for profile in profiles) or "none defined"
    raise UsageError(f"unknown workload '{name}' (known: {known})")


def covered(
    results: Iterable[Result],
    profiles: Sequence[WorkloadProfile],
    hardware_key: Callable[[str], str],
) -> set[tuple[str, str, str]]:
    """(recipe id, hardware key, profile id) of every published or measured result that names
    a recipe: where one exists, a simulated row of that recipe, hardware and profile is not
    needed (and not shown)."""
    known = [p.id for p in profiles]
    return {
        (r.recipe.id, hardware_key(r.hardware), p.id)
        for r in results
        if r.source.kind != "simulated" and r.recipe.id is not None
        for p in profiles
        if matches(p, r, known)
    }
