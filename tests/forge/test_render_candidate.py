"""The optimizer's candidate comment with a single trial and a single run each: counts in the
singular, and no interval where one run each gives none (compared verbatim, as in
test_render.py)."""

from __future__ import annotations

import os
from pathlib import Path

from reconciler.forge.comments import render
from tests.forge import views

EXPECTED = Path(__file__).resolve().parent / "expected" / "candidate-one-trial.md"


def test_one_trial_and_one_run_read_in_the_singular() -> None:
    view = views.CANDIDATE.model_copy(update={"trials": 1, "repeats": 1})
    text = render(view)
    if os.environ.get("DENV_UPDATE_GOLDEN") == "1":
        EXPECTED.write_text(text)
    assert text == EXPECTED.read_text(), f"{EXPECTED} differs; DENV_UPDATE_GOLDEN=1 rewrites it"
