"""docs/security.md's threat model says what the code does: every folder denv reads has a
row, and a row's source is the default branch exactly when the code reads that path from
the trusted ref (`is_trusted_path`); the table in docs/github.md agrees with it."""

from __future__ import annotations

import re
from pathlib import Path

from reconciler.spec.sources import DENV_DIRS, TRUSTED_PREFIXES, is_trusted_path

DOCS = Path(__file__).resolve().parents[2] / "docs"
# A repository path opening a row: `fleets/**`, `policies/*.yaml`, `policies/allowed_signers`.
_PATH = re.compile(r"^`((?:" + "|".join(DENV_DIRS) + r")/[^`]*)`")


def _rows(doc: str, heading: str) -> list[list[str]]:
    section = doc.split(heading, 1)[1].split("\n## ")[0]
    return [
        [cell.strip() for cell in line.split("|")[1:-1]]
        for line in section.splitlines()
        if line.startswith("| ") and not line.startswith("| input ")
    ]


def _example(pattern: str) -> str:
    """A file the pattern names: `fleets/**` → fleets/x/y.yaml."""
    return pattern.replace("**", "x/y.yaml").replace("*.yaml", "z.yaml")


def _path_rows() -> dict[str, str]:
    """Each repository path of the threat model → the ref its row says it is read from."""
    rows = _rows((DOCS / "security.md").read_text(), "## The threat model")
    assert all(len(row) == 4 for row in rows), "every row has input, who, source, reach"
    found = {}
    for subject, _who, source, _reach in rows:
        if match := _PATH.match(subject):
            found[match.group(1)] = source
    return found


def test_every_repository_path_says_the_ref_the_code_reads_it_from() -> None:
    rows = _path_rows()
    assert {path.split("/")[0] for path in rows} == set(DENV_DIRS)
    for path, source in rows.items():
        assert source in ("the default branch", "the pull request"), (path, source)
        assert is_trusted_path(_example(path)) is (source == "the default branch"), path


def test_every_trusted_prefix_has_a_row() -> None:
    rows = _path_rows()
    for prefix in TRUSTED_PREFIXES:
        assert any(path.startswith(prefix) for path in rows), prefix


def test_the_github_table_agrees_with_the_threat_model() -> None:
    rows = _path_rows()
    github = _rows((DOCS / "github.md").read_text(), "## What a pull request can and cannot change")
    listed = {cells[0].strip("`"): cells[1] for cells in github if cells[0].startswith("`")}
    assert listed == rows
