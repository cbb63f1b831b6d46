"""Pure logic: which results a workload profile (catalog/workloads.yaml) covers, and finding
a profile by name."""

from __future__ import annotations

from collections.abc import Sequence

from reconciler.errors import UsageError
from reconciler.spec.result import Result
from reconciler.spec.workload import WorkloadProfile


def matches(profile: WorkloadProfile, result: Result) -> bool:
    """A result counts as the profile when its workload names the profile, or when its
    nominal input and output lengths both fall inside the profile's ranges."""
    workload = result.workload
    if workload.name is not None and workload.name.lower() == profile.id:
        return True
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
