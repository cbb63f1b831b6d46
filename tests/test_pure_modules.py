"""A module whose docstring says it is pure ("Pure logic:", "Models:") reaches no adapter's
library, not even through another module; import-linter's contracts (`make lint`) keep each
library in its one adapter, this keeps the docstrings honest. A pure module that needs what an
adapter module holds takes it as a parameter, or the pure part moves to a pure module."""

from __future__ import annotations

import ast
from functools import cache

import grimp
import pytest

from tests.conftest import ROOT

ADAPTER_LIBRARIES = ("fabric", "paramiko", "pygit2", "aiohttp", "github", "optuna")
PURE = ("Pure logic", "Models:")


def pure_modules() -> list[str]:
    found = []
    for path in sorted((ROOT / "reconciler").rglob("*.py")):
        docstring = ast.get_docstring(ast.parse(path.read_text())) or ""
        if docstring.startswith(PURE):
            parts = path.relative_to(ROOT).with_suffix("").parts
            found.append(".".join(parts).removesuffix(".__init__"))
    return found


@cache
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("reconciler", include_external_packages=True)


def test_the_pure_modules_are_found() -> None:
    modules = pure_modules()
    assert len(modules) > 100
    assert {"reconciler.spec.recipe", "reconciler.reconcile.plan"} <= set(modules)


@pytest.mark.parametrize("module", pure_modules())
def test_a_pure_module_reaches_no_adapter_library(module: str) -> None:
    chains = {
        library: " -> ".join(chain)
        for library in ADAPTER_LIBRARIES
        if (chain := graph().find_shortest_chain(importer=module, imported=library))
    }
    assert chains == {}
