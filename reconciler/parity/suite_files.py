"""Adapter: parity suite files — `policies/parity/<name>.jsonl` of a denv repository, or any
`.jsonl` path — read and parsed."""

from __future__ import annotations

from pathlib import Path

from reconciler.errors import NotFound
from reconciler.parity.suite import Suite, parse_suite
from reconciler.spec.bounds import max_bytes
from reconciler.spec.reading import UnreadableFile, read_bounded
from reconciler.spec.sources import WorkTree

SUITES_DIR = "policies/parity"


def suite_names(root: Path) -> list[str]:
    return sorted(p.stem for p in (root / SUITES_DIR).glob("*.jsonl"))


def load_suite(root: Path, name: str) -> Suite:
    """A suite by name (`default` -> policies/parity/default.jsonl under `root`, read as every
    file of the repository is: a link that leaves it is refused), or by path when `name` ends
    in .jsonl; SpecError names the line and field of every bad prompt."""
    if name.endswith(".jsonl"):
        path, label = Path(name), name
    else:
        label = f"{SUITES_DIR}/{name}.jsonl"
        path = root / label
    if not path.exists() and not path.is_symlink():
        known = ", ".join(suite_names(root)) or "none"
        raise NotFound(f"no parity suite '{name}': {label} does not exist (suites: {known})")
    try:
        if name.endswith(".jsonl"):
            data = read_bounded(path, max_bytes(label))
        else:
            data = WorkTree(root).read(label)
    except UnreadableFile as exc:
        raise NotFound(f"parity suite {label}: {exc}") from exc
    return parse_suite(Path(name).stem, label, data)
