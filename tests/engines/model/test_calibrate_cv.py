"""scripts/calibrate_sim.py --cv keeps what an interrupted run did: its residuals survive a save
and a load, and an unfinished run is reported but never written as the shipped files."""

from __future__ import annotations

from dataclasses import replace
from multiprocessing import Pool
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


@pytest.fixture(scope="module")
def published() -> tuple[list[calibrate_sim.Point], list[calibrate_sim.Point]]:
    repo = calibrate_sim.load(calibrate_sim.REPO)
    hardware = {hw.id: hw for hw in repo.hardware.values()}
    for hw in list(hardware.values()):
        hardware.update(dict.fromkeys(hw.aliases, hw))
    return (
        calibrate_sim.points(repo.results, hardware, disagg=False),
        calibrate_sim.points(repo.results, hardware, disagg=True),
    )


def test_no_fold_starts_from_constants_that_saw_its_points(
    published: tuple[list[calibrate_sim.Point], list[calibrate_sim.Point]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every refit of --cv (the fold's, and the other choice's of a weighed hardware) starts
    from constants fitted on none of the fold's points and fits on none of them."""
    agg, disagg = published
    fold_of = calibrate_sim.folds(agg + disagg, 5)
    refits: list[tuple[calibrate_sim.Fitted, frozenset[str]]] = []

    def recorded(
        agg: list[calibrate_sim.Point],
        disagg: list[calibrate_sim.Point],
        *args: object,
        start: calibrate_sim.Fitted | None = None,
        **kwargs: object,
    ) -> calibrate_sim.Fitted:
        if start is None:
            start = args[3]  # type: ignore[assignment]
        assert start is not None and start.trained_on is not None
        trained = frozenset(p.result.id for p in agg + disagg)
        refits.append((start, trained))
        return replace(start, trained_on=start.trained_on | trained)

    monkeypatch.setattr(calibrate_sim, "fit", recorded)
    monkeypatch.setattr(calibrate_sim, "_held_out", lambda *args: [])
    monkeypatch.setattr(calibrate_sim, "CV_SAVED", tmp_path / "cv.json")
    cv = calibrate_sim.cross_validate(agg, disagg, None, 5, 12, 1)  # type: ignore[arg-type]
    assert cv.folds_done == [0, 1, 2, 3, 4]
    weighed = calibrate_sim.own_candidates(agg)
    assert len(refits) == 5 * (1 + len(weighed))
    per_fold = 1 + len(weighed)
    for n, (start, trained) in enumerate(refits):
        held = {
            p.result.id
            for p in agg + disagg
            if fold_of[calibrate_sim.configuration(p)] == n // per_fold
        }
        assert start.trained_on is not None and not start.trained_on & held
        assert held and not trained & held


def test_a_fold_started_from_the_full_fit_is_refused(
    published: tuple[list[calibrate_sim.Point], list[calibrate_sim.Point]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """calibration.py's constants were fitted on every point: a fold started from them would
    report errors partly in sample, and --cv stops instead."""
    agg, disagg = published
    monkeypatch.setattr(calibrate_sim, "prior_fit", calibrate_sim.full_fit)
    with pytest.raises(ValueError, match="fold 1: constants fitted on its held-out points"):
        calibrate_sim.cross_validate(agg, disagg, None, 5, 12, 1)  # type: ignore[arg-type]


def test_a_fit_records_the_points_it_was_fitted_on(
    published: tuple[list[calibrate_sim.Point], list[calibrate_sim.Point]],
) -> None:
    agg, disagg = published
    train = [p for p in agg if calibrate_sim._fits_efficiency(p)][:2]
    handoff = [p for p in disagg if p.concurrency <= calibrate_sim.PD_FIT_MAX_CONCURRENCY][:1]
    model = calibrate_sim.load(calibrate_sim.REPO).models["deepseek-r1"]
    with Pool(1) as pool:
        fitted = calibrate_sim.fit(train, handoff, model, 0, pool, calibrate_sim.prior_fit())
    assert fitted.trained_on == {p.result.id for p in train + handoff}
    assert calibrate_sim.full_fit().trained_on is None  # every point
