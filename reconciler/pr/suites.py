"""Composition: the parity suites of a pull request's bench. The suite that gates is the
default branch's: the parity policy names it (a policy, so from the default branch too), or
`--suite` names another of the default branch's suites, or a file outside the pull request's
checkout. When the pull request adds or changes that suite, its own version runs beside the
gate, is reported, and never gates: a pull request cannot pick the test it must pass."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from reconciler.errors import DenvError
from reconciler.forge.trusted import TrustedRef
from reconciler.parity.suite import Suite, parse_suite
from reconciler.parity.suite_files import SUITES_DIR, load_suite
from reconciler.reconcile.source import GitSource
from reconciler.spec.policy import ParityPolicy

CHANGED = "parity suite changed by this pull request"


@dataclass(frozen=True)
class ParitySuites:
    policy: ParityPolicy  # the default branch's
    gate: Suite | str  # the suite that gates, or why parity cannot run
    origin: str  # where the gating suite comes from, as comments say it
    changed: str | None = None  # the suite's path, when the pull request changes it
    proposed: Suite | str | None = None  # the pull request's version, or why it cannot run

    def note(self, trusted: TrustedRef) -> str | None:
        """What the bench comment says of a changed suite (None: unchanged)."""
        if self.changed is None:
            return None
        beside = (
            f"the pull request's version ran beside it and does not gate ({self.proposed})"
            if isinstance(self.proposed, str)
            else "the pull request's version ran beside it and does not gate"
        )
        return (
            f"**The {CHANGED}** (`{self.changed}`): the gate used `{trusted.branch}`'s "
            f"suite; {beside}."
        )


def _parsed(name: str, path: str, data: bytes | None, where: str) -> Suite | str:
    if data is None:
        return f"parity cannot run: no parity suite {path} {where}"
    try:
        return parse_suite(name, path, data)
    except DenvError as exc:
        return f"parity cannot run: {exc}"


def _suite_file(root: Path, name: str, trusted: TrustedRef) -> Suite | str:
    """A suite file the operator names: never one inside the pull request's checkout, whose
    files are the pull request's."""
    if Path(name).resolve().is_relative_to(root.resolve()):
        return (
            f"parity cannot run: {name} is inside the pull request's checkout; name a suite of "
            f"`{trusted.branch}` instead (--suite NAME)"
        )
    try:
        return load_suite(root, name)
    except DenvError as exc:
        return f"parity cannot run: {exc}"


def parity_suites(
    source: GitSource,
    root: Path,
    trusted: TrustedRef,
    head: str,
    policy: ParityPolicy,
    name: str | None,
) -> ParitySuites:
    """The gating suite (`name`, else the policy's) from the default branch; beside it the
    head's version of the same file when the pull request adds, changes or removes it."""
    name = name or policy.suite
    if name.endswith(".jsonl"):
        return ParitySuites(policy, _suite_file(root, name, trusted), f"`{name}`")
    path = f"{SUITES_DIR}/{name}.jsonl"
    trusted_data, head_data = source.read(trusted.commit, path), source.read(head, path)
    gate = _parsed(name, path, trusted_data, f"on `{trusted.branch}`")
    origin = f"`{path}` of `{trusted.label}`"
    if head_data == trusted_data:
        return ParitySuites(policy, gate, origin)
    proposed = _parsed(name, path, head_data, "at the head: this pull request removes it")
    return ParitySuites(policy, gate, origin, changed=path, proposed=proposed)
