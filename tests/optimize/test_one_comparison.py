"""One number per comparison: a candidate's verification decides on one comparison (the means
of its interleaved repeats and the gain); the candidates table, `--json` and the pull
request's body all show that one, never a figure recomputed from other runs. And the body
says what the candidate changes, never an arrow between two equal recipes."""

from __future__ import annotations

import json

from reconciler.forge.comments import render
from reconciler.optimize.candidates import Status, table
from reconciler.optimize.promote import candidate_view
from reconciler.optimize.verify import gain_interval, percent
from reconciler.spec.recipe import Recipe, RecipeFile
from reconciler.spec.yamlio import parse_yaml, plain
from tests.conftest import ROOT
from tests.optimize.test_candidates import row as make_row
from tests.optimize.test_candidates import run, state

RECIPE = "llama-3.1-8b/vllm@1"


def recipe() -> Recipe:
    parsed, _ = parse_yaml("r.yaml", (ROOT / f"recipes/{RECIPE}.yaml").read_bytes())
    assert parsed is not None
    return RecipeFile.model_validate(plain(parsed.data)).recipe


def test_table_json_and_pull_request_show_the_verifications_one_gain() -> None:
    # the baseline run (10.0) and the trial run (17.0) are not the verification's sides:
    # the current release's repeats are 11.0 and 11.06, the candidate's three runs its own
    repeats = gain_interval([11.0, 11.06], [17.0, 16.2, 16.22], True)
    win = make_row(
        "c-spec",
        Status.VERIFIED,
        17.0,
        300.0,
        parity_passed=True,
        parity="pass (tolerant, 20 of 20 prompts agree)",
        recipe=RECIPE,
        gain=repeats,
    ).model_copy(
        update={
            "change": "speculative off→ngram ×2",
            "runs": [run(17.0, 300.0), run(16.2, 310.0), run(16.22, 305.0)],
        }
    )
    study = state(win)
    study = study.model_copy(
        update={
            "current": study.current.model_copy(
                update={"runs": [run(10.0, 400.0), run(11.0, 390.0), run(11.06, 395.0)]}
            )
        }
    )
    shown = percent(repeats.gain)  # "+49.3%": the figure the verification decided on
    [_, cells] = table(study)
    assert cells[2] == f"16.47 (gain {shown} vs 11.03)"
    dumped = json.loads(study.model_dump_json())  # what `optimize candidates --json` prints
    assert percent(dumped["candidates"][0]["gain"]["gain"]) == shown
    current = recipe()
    body = render(candidate_view(study, win, current, current, simulated=True))
    assert f": gain {shown} in goodput/GPU (req/s)" in body
    assert f"Gain {shown} (95% interval" in body
    assert "| goodput/GPU (req/s) | 11.0 | 16.5 |" in body
    # the recipe is the same on both sides: the body says what changes, with no arrow
    assert f"`{RECIPE}` → `{RECIPE}`" not in body
    assert f"recipe `{RECIPE}`, speculative off→ngram ×2." in body


def test_a_lower_is_better_goal_shows_its_gain_as_a_gain() -> None:
    """TTFT p99 from 500 to 440 ms is a gain of +12%, and the interval reads the same way."""
    repeats = gain_interval([500.0, 502.0], [440.0, 441.0], False)
    win = make_row(
        "c-lat", Status.VERIFIED, 440.0, 440.0, parity_passed=True, parity="pass", gain=repeats
    )
    study = state(win).model_copy(update={"goal": "latency"})
    current = recipe()
    body = render(candidate_view(study, win, current, current, simulated=False))
    assert f": gain {percent(repeats.gain)} in TTFT p99 (ms)" in body
    assert percent(repeats.gain).startswith("+")
    assert f"Gain {percent(repeats.gain)} (95% interval {percent(repeats.low)}" in body
    assert table(study)[1][2] == f"440 (gain {percent(repeats.gain)} vs 501)"
