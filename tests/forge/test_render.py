"""Every registered comment kind rendered from a view, compared verbatim with
tests/forge/expected/."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pydantic import BaseModel

from reconciler.forge.comments import KINDS, render
from reconciler.forge.handled import Handled
from reconciler.forge.kinds.bench import change
from reconciler.forge.kinds.commands import CommandsView
from reconciler.forge.markers import read_marker
from reconciler.forge.render import cell
from reconciler.forge.views import MetricDelta, Parities
from tests.forge import views

EXPECTED = Path(__file__).resolve().parent / "expected"

COMMANDS = CommandsView(
    handled=[
        Handled(comment_id=7, user="grace", command="plan", outcome="check 'denv plan' success"),
        Handled(comment_id=9, user="ada", command="bench", outcome="failed: x --> y"),
    ]
)
CASES: list[tuple[str, BaseModel]] = [
    ("plan", views.PLAN),
    ("plan-invalid", views.PLAN_INVALID),
    ("plan-nothing", views.PLAN_NOTHING),
    ("bench", views.BENCH),
    ("parity-pass", Parities(verdicts=[views.PARITY_PASS])),
    ("parity-fail", Parities(verdicts=[views.PARITY_FAIL])),
    ("parity-proposed", Parities(verdicts=[views.PARITY_PROPOSED])),
    ("commands", COMMANDS),
    ("candidate", views.CANDIDATE),
    ("rollback", views.ROLLBACK),
    ("promotion", views.PROMOTION),
    ("deploy", views.DEPLOY),
    ("closed", views.CLOSED),
]


def test_every_registered_kind_has_an_expected_rendering() -> None:
    assert {name.split("-")[0] for name, _ in CASES} == set(KINDS)


@pytest.mark.parametrize(("name", "view"), CASES, ids=[c[0] for c in CASES])
def test_comment_matches_expected_file(name: str, view: BaseModel) -> None:
    text = render(view)
    path = EXPECTED / f"{name}.md"
    if os.environ.get("DENV_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"{path} is missing; run the tests with DENV_UPDATE_GOLDEN=1"
    assert text == path.read_text(), f"{path} differs; DENV_UPDATE_GOLDEN=1 rewrites it"
    kind = name.split("-")[0]
    assert read_marker(text) == (kind, 1)


@pytest.mark.parametrize(
    ("current", "candidate", "higher", "shown"),
    [
        (100.0, 112.0, True, "+12.0% (better)"),
        (100.0, 112.0, False, "+12.0% (worse)"),
        (0.5, 0.45, False, "−10.0% (better)"),
        (100.0, 100.3, True, "+0.3% (same)"),
        (None, 3.0, True, "new"),
    ],
    ids=["up-good", "up-bad", "down-good", "noise", "no-release"],
)
def test_change_column(current: float | None, candidate: float, higher: bool, shown: str) -> None:
    metric = MetricDelta(
        name="m", unit="u", current=current, candidate=candidate, higher_is_better=higher
    )
    assert change(metric) == shown


def test_cells_keep_tables_intact() -> None:
    assert cell("a | b\nc") == "a \\| b c"


def test_several_verdicts_are_one_parity_comment() -> None:
    """A pull request changing two releases: one marker, the verdicts apart, one footer."""
    one = render(Parities(verdicts=[views.PARITY_PASS]))
    both = render(Parities(verdicts=[views.PARITY_PASS, views.PARITY_FAIL]))
    assert both.count("<!-- denv:parity") == 1 and read_marker(both) == ("parity", 1)
    assert both.count("Posted by denv") == 1 and both.endswith(one.splitlines()[-1] + "\n")
    assert "\n\n---\n\n### Parity: FAIL" in both
