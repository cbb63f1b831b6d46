"""Every file denv reads is measured before it is read, through one reader
(reconciler/spec/reading.py): a repository's files, and the files an operator names on the
command line (a traffic file, a result to compare, a simulator spec), which may come from
anyone (a pull request's artifact, a trace someone shared). The rule is checked in the code
too: a module that reads a file another way is one the list below names, with why."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.pr.test_plan import denv_in as denv

SIZE = 100 * 1024 * 1024  # above every bound: JSON Lines 64 MiB, YAML and JSON 64 KiB
JSONL = f"file is {SIZE:,} bytes; denv JSON Lines files are at most 67,108,864 bytes"
YAML = f"file is {SIZE:,} bytes; denv YAML files are at most 65,536 bytes"


def sparse(folder: Path, name: str) -> Path:
    path = folder / name
    with path.open("wb") as file:
        file.truncate(SIZE)  # no disk; 100 MB of zeros to whoever reads it
    return path


@pytest.mark.parametrize(
    ("name", "argv", "expected"),
    [
        pytest.param(
            "huge.jsonl",
            ["sim", "predict", "--recipe", "llama-3.1-8b/vllm@1", "--traffic"],
            f"huge.jsonl: cannot read the traffic file: {JSONL}",
            id="sim-traffic",
        ),
        pytest.param(
            "huge.json",
            ["bench", "compare"],
            f"huge.json: cannot read the result file: {YAML}",
            id="bench-compare",
        ),
    ],
)
def test_a_file_the_operator_names_is_measured_not_read(
    denv_repo: Path, name: str, argv: list[str], expected: str
) -> None:
    huge = sparse(denv_repo.parent, name)
    args = [*argv, str(huge)] + ([str(huge)] if argv[-1] == "compare" else [])
    run = denv(denv_repo, *args)
    assert "this is a bug" not in run.stderr, run.stderr
    assert expected in run.stdout + run.stderr, run.stdout + run.stderr
    assert run.returncode == 1, run.stdout + run.stderr


# Modules that read a file without the bounded reader, and why that file is no input from
# anyone but denv itself or the operator's own configuration. The agent (fleet/host/) runs on
# the hosts and reads only its own files there: it is not listed.
OWN_FILES = {
    "cli/bench.py": "the last ranking, in denv's own state folder",
    "engines/model/error_bands.py": "a data file of the package",
    "engines/model/error_intervals.py": "a data file of the package",
    "fleet/hostagent.py": "the agent's own sources, zipped to send to hosts",
    "forge/config.py": "the GitHub App's private key, a file the operator names",
    "forge/localstore.py": "the local forge's store: its boundary is the filesystem",
    "forge/render.py": "a comment template of the package",
    "optimize/state.py": "a study's state, in the repository's git directory",
    "rollout/overview.py": "unreachable hosts' streaks, in denv's own state folder",
    "spec/parsecache.py": "its own entries (owned, private) and the parser's source",
    "spec/reading.py": "the bounded reader itself",
    "trials/owner.py": "/proc",
    "ui/export.py": "the package's static files, copied into an export",
}
READS = {"read_text", "read_bytes", "load"}


def _reads_a_file(call: ast.Call) -> bool:
    func = call.func
    if isinstance(func, ast.Name):  # open(path) or open(path, "r...")
        if func.id != "open":
            return False
        mode = call.args[1] if len(call.args) > 1 else None
        return not isinstance(mode, ast.Constant) or "r" in str(mode.value)
    if not isinstance(func, ast.Attribute):
        return False
    if func.attr in READS:  # path.read_text(), json.load(stream)
        return func.attr != "load" or (isinstance(func.value, ast.Name) and func.value.id == "json")
    # path.open("rb"), os.open(path, os.O_RDONLY)
    first = call.args[0] if call.args else None
    reading = isinstance(first, ast.Constant) and str(first.value).startswith("r")
    return func.attr == "open" and (reading or ast.unparse(func.value) == "os")


def test_every_file_read_goes_through_the_bounded_reader() -> None:
    readers = set()
    for path in sorted((ROOT / "reconciler").rglob("*.py")):
        module = path.relative_to(ROOT / "reconciler").as_posix()
        if module.startswith("fleet/host/"):
            continue
        tree = ast.parse(path.read_text())
        if any(isinstance(n, ast.Call) and _reads_a_file(n) for n in ast.walk(tree)):
            readers.add(module)
    assert readers == set(OWN_FILES), "read through spec/reading.py, or say here why not"
