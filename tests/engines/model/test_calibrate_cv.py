"""scripts/calibrate_sim.py --cv keeps what an interrupted run did: its residuals survive a save
and a load, and an unfinished run is reported but never written as the shipped files."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.engines.model.error_intervals import Residual
from scripts import calibrate_sim
from scripts.calibrate_sim import CrossValidation, load_cv, report_cv, save_cv

RESIDUAL = Residual(
    point="p1",
    configuration="b200|fp8|None|sglang|{}",
    hardware="b200",
    generation="blackwell",
    engine="sglang",
    mode="aggregated",
    concurrency=8,
    mtp=False,
    output_tok_s_per_gpu=0.1,
    ttft_p50_ms=-0.2,
    tpot_p50_ms=0.05,
)


def test_a_saved_run_loads_with_its_folds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(calibrate_sim, "CV_SAVED", tmp_path / "cv.json")
    cv = CrossValidation([RESIDUAL], [], [448.0], 4653, folds_done=[0], sweeps=12)
    save_cv(cv)
    assert load_cv(tmp_path / "cv.json") == cv


def test_an_unfinished_run_is_not_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("ERRORS_PATH", "INTERVALS_PATH"):
        monkeypatch.setattr(calibrate_sim, name, tmp_path / name)
    cv = CrossValidation([RESIDUAL], [], [448.0], 4653, folds_done=[0], sweeps=12)
    with pytest.raises(SystemExit, match="unfinished"):
        report_cv(cv, 5, write=True)
    assert "folds [2, 3, 4, 5] of 5 not run" in capsys.readouterr().out
    assert not list(tmp_path.iterdir())


def _on(hardware: str, generation: str, tput: float) -> Residual:
    return RESIDUAL.model_copy(
        update={"hardware": hardware, "generation": generation, "output_tok_s_per_gpu": tput}
    )


def test_own_constants_take_the_residuals_of_that_choice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run with B300 on Blackwell's constants that also weighed its own: the held-out loss
    names the better choice, and once OWN_CONSTANTS holds b300 the report takes the other
    choice's residuals for every Blackwell point and keeps the rest."""
    monkeypatch.setattr(calibrate_sim, "CV_SAVED", tmp_path / "cv.json")
    ran = [_on("b200", "blackwell", 0.1), _on("b300", "blackwell", 0.5), _on("mi355x", "cdna4", 0)]
    other = [_on("b200", "blackwell", 0.05), _on("b300", "blackwell", 0.1)]
    cv = CrossValidation(
        ran, [], [1.0], 10, folds_done=[0], sweeps=12, alternatives={"b300": other}
    )
    save_cv(cv)
    assert load_cv(tmp_path / "cv.json") == cv

    assert calibrate_sim.weigh_own(cv) == ran
    assert "b300: the held-out error chooses own constants" in capsys.readouterr().out
    monkeypatch.setattr(calibrate_sim.calibration, "OWN_CONSTANTS", frozenset({"b300"}))
    assert sorted(r.output_tok_s_per_gpu for r in calibrate_sim.weigh_own(cv)) == [0, 0.05, 0.1]
    monkeypatch.setattr(calibrate_sim.calibration, "OWN_CONSTANTS", frozenset({"b200"}))
    with pytest.raises(SystemExit, match="run --cv again"):
        calibrate_sim.weigh_own(cv)
