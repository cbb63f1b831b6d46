"""Every comment kind rendered from a view, compared verbatim with tests/forge/expected/."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pydantic import BaseModel

from reconciler.forge import render
from reconciler.forge.markers import read_marker
from reconciler.forge.views import MetricDelta
from tests.forge import views

EXPECTED = Path(__file__).resolve().parent / "expected"

CASES = [
    ("plan", render.render_plan, views.PLAN),
    ("plan-invalid", render.render_plan, views.PLAN_INVALID),
    ("plan-nothing", render.render_plan, views.PLAN_NOTHING),
    ("bench", render.render_bench, views.BENCH),
    ("parity-pass", render.render_parity, views.PARITY_PASS),
    ("parity-fail", render.render_parity, views.PARITY_FAIL),
    ("parity-proposed", render.render_parity, views.PARITY_PROPOSED),
    ("candidate", render.render_candidate, views.CANDIDATE),
    ("rollback", render.render_rollback, views.ROLLBACK),
    ("promotion", render.render_promotion, views.PROMOTION),
    ("deploy", render.render_deploy, views.DEPLOY),
    ("closed", render.render_closed, views.CLOSED),
]


@pytest.mark.parametrize(("name", "renderer", "view"), CASES, ids=[c[0] for c in CASES])
def test_comment_matches_expected_file(name: str, renderer: object, view: BaseModel) -> None:
    text = renderer(view)  # type: ignore[operator]
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
    assert render.change(metric) == shown


def test_cells_keep_tables_intact() -> None:
    assert render.cell("a | b\nc") == "a \\| b c"


def test_several_verdicts_are_one_parity_comment() -> None:
    """A pull request changing two releases: one marker, the verdicts apart, one footer."""
    one = render.render_parity(views.PARITY_PASS)
    both = render.render_parities([views.PARITY_PASS, views.PARITY_FAIL])
    assert render.render_parities([views.PARITY_PASS]) == one
    assert both.count("<!-- denv:parity") == 1 and read_marker(both) == ("parity", 1)
    assert both.count("Posted by denv") == 1 and both.endswith(one.splitlines()[-1] + "\n")
    assert "\n\n---\n\n### Parity: FAIL" in both
