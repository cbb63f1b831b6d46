"""Adapter: parity suite files — `policies/parity/<name>.jsonl` of a denv repository, or any
`.jsonl` path — read and parsed."""

from __future__ import annotations

from pathlib import Path

from reconciler.errors import NotFound
from reconciler.parity.suite import Suite, parse_suite

SUITES_DIR = "policies/parity"


def suite_names(root: Path) -> list[str]:
    return sorted(p.stem for p in (root / SUITES_DIR).glob("*.jsonl"))


def load_suite(root: Path, name: str) -> Suite:
    """A suite by name (`default` -> policies/parity/default.jsonl under `root`), or by path
    when `name` ends in .jsonl; SpecError names the line and field of every bad prompt."""
    if name.endswith(".jsonl"):
        path, label = Path(name), name
    else:
        label = f"{SUITES_DIR}/{name}.jsonl"
        path = root / label
    try:
        data = path.read_bytes()
    except FileNotFoundError as exc:
        known = ", ".join(suite_names(root)) or "none"
        raise NotFound(
            f"no parity suite '{name}': {label} does not exist (suites: {known})"
        ) from exc
    except OSError as exc:
        raise NotFound(f"parity suite {label}: {exc.strerror}") from exc
    return parse_suite(Path(name).stem, label, data)
