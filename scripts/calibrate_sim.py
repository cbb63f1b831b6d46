#!/usr/bin/env python3
"""Calibrate denv's simulator on published measurements, or report how well it matches them.

    .venv/bin/python scripts/calibrate_sim.py --report        # errors of calibration.py's constants
    .venv/bin/python scripts/calibrate_sim.py --fit --write   # fit them again, write them
    .venv/bin/python scripts/calibrate_sim.py --report --disagg   # the P/D rows instead
    .venv/bin/python scripts/calibrate_sim.py --errors   # both; write the in-sample tables
    .venv/bin/python scripts/calibrate_sim.py --cv --write   # held out: bench's bands, intervals

Points: the InferenceX DeepSeek-R1-0528 rows of results/published/inferencex.jsonl served by
plain SGLang, aggregated (fixed ISL/OSL drawn from [0.8 L, L], closed-loop concurrency), the
newest run of each configuration and concurrency. Each point is predicted with
`reconciler.engines.model.predict` exactly as `denv sim predict` would, from a recipe rebuilt
from the row (topology, precision, MTP) and the launch settings InferenceX's scripts use.

The fit: per GPU generation (calibration.GENERATION), five efficiency constants with a physical
meaning (calibration.py `Efficiency`), and one MTP acceptance rate for all, chosen by a
multiplicative pattern search (coordinate by coordinate, in log space) minimising the mean
absolute log error of output tok/s/GPU, median TPOT and (half weight) median TTFT. Pure
Python; no SciPy. `--fit --write` puts the result into calibration.py.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from multiprocessing import Pool
from multiprocessing.pool import Pool as PoolType
from pathlib import Path
from typing import Literal

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from reconciler.cli.common import load  # noqa: E402
from reconciler.engines.model import calibration, traffic  # noqa: E402
from reconciler.engines.model.calibration import Efficiency, Tuning  # noqa: E402
from reconciler.engines.model.error_bands import (  # noqa: E402
    ERRORS_FILE,
    IN_SAMPLE_FILE,
    ErrorGroup,
    ErrorTable,
    markdown_table,
)
from reconciler.engines.model.error_intervals import (  # noqa: E402
    FIGURES,
    INTERVALS_FILE,
    MIN_POINTS,
    IntervalTable,
    Residual,
    band_of,
    cells_of,
    choose_scale,
    coverage,
    nested_coverage,
    unseen,
    unseen_coverage,
)
from reconciler.engines.model.perf import WeightsDoNotFit  # noqa: E402
from reconciler.engines.model.predict import default_requests, predict  # noqa: E402
from reconciler.engines.model.stats import Prediction  # noqa: E402
from reconciler.spec.catalog import Hardware, ModelArch  # noqa: E402
from reconciler.spec.recipe import (  # noqa: E402
    AggregatedTopology,
    EngineRef,
    KvCache,
    Quantization,
    Recipe,
    Settings,
    Speculative,
)
from reconciler.spec.result import Result  # noqa: E402

RANGE_RATIO = 0.8  # InferenceX's RANDOM_RANGE_RATIO (published-results.md §4)
FIT_REQUESTS_PER_CLIENT = 3  # fewer than a prediction's 11, to keep the search quick
FIT_MAX_CONCURRENCY = 256
EFFICIENCY_STEP = 1.6  # the pattern search's first factor (efficiencies; scalars below)
SCALAR_STEP = 1.4
PD_FIT_MAX_CONCURRENCY = 8
SWEEPS = 12  # the pattern search's most sweeps per constant set (--sweeps)
ERRORS_PATH = REPO / "reconciler/engines/model" / ERRORS_FILE
Errors = tuple[float, float, float]  # |predicted / measured - 1|: tok/s/GPU, TTFT p50, TPOT p50
PARAMS = ("mfu", "hbm", "kv_hbm", "layer_floor_s", "request_overhead_s")
# Physically plausible ranges: no kernel reaches more than 80 % of peak FLOPS or 90 % of
# the HBM bandwidth (STREAM-like copies reach about that on H100/MI300X).
BOUNDS = {
    "mfu": (0.05, 0.8),
    "hbm": (0.1, 0.9),
    "kv_hbm": (0.05, 0.9),
    "layer_floor_s": (2e-6, 500e-6),
    "collective_s": (1e-6, 200e-6),
    "request_overhead_s": (1e-3, 0.5),
    "mtp": (0.05, 0.95),
    "pd_handoff_s": (1e-3, 1.0),
}


@dataclass(frozen=True)
class Point:
    result: Result
    recipe: Recipe
    hardware: Hardware
    isl: int
    osl: int
    concurrency: int
    tput: float  # output tok/s/GPU, all GPUs
    ttft: float  # median, ms
    tpot: float  # median, ms
    disagg: bool = False


def launch(
    hw: Hardware,
    precision: str,
    spec: str | None,
    tp: int,
    io: tuple[int, int],
    conc: int,
    disagg: bool = False,
) -> tuple[Settings, list[str]]:
    """Settings and engine args as InferenceX's DeepSeek-R1 SGLang scripts pass them
    (benchmarks/single_node/fixed_seq_len/dsr1_*.sh of SemiAnalysisAI/InferenceX, read at
    8eec0d4, 432945d, 25cbe71 and 0762e65; simplified where a GPU's scripts changed between
    runs). Everywhere: radix cache off, fp8 KV except on Hopper,
    MTP with 2 (NVIDIA) or 3 (AMD) steps. Blackwell polls new requests every 30 steps from 16
    clients (10 below); FP4: 256 running, --mem-fraction-static 0.85, chunks of 16k; FP8 TP8:
    128 running, 0.82, 32k; FP8 TP4: 32 running, 0.95, 8k; FP8 MTP: 512 running, 0.82, 16k.
    H200: 512 running at 1k/1k, else 256; 0.82; 32k. AMD: 0.8, chunks of 128k, 4 decode steps
    between looks at the queue (MI355X FP8: 8), CUDA graphs to batch 128 (MI355X FP8: the
    concurrency). Disaggregated runs (used only to fit the P/D hand-off) use srt-slurm and
    MoRI recipes whose caps follow the load: the running cap is left to KV, chunks of 16k,
    0.82."""
    quant: Quantization = "fp8" if precision == "fp8" else "fp4"
    args: list[str] = []
    kv: Literal["auto", "fp8_e4m3"] = "fp8_e4m3"
    if disagg:  # srt-slurm / MoRI recipes: running caps sized to the load, so left to KV
        kv = "auto" if hw.id in ("h100", "h200") else "fp8_e4m3"
        max_batch, fraction, chunk = 4096, 0.82, 16384
        quant = ("nvfp4" if hw.vendor == "nvidia" else "mxfp4") if precision == "fp4" else "fp8"
    elif hw.vendor == "nvidia" and hw.id in ("h100", "h200"):
        kv, fraction, chunk = "auto", 0.82, 32768
        max_batch = 512 if io == (1024, 1024) else 256
    elif hw.vendor == "nvidia":
        quant = "nvfp4" if precision == "fp4" else "fp8"
        if precision == "fp4":
            max_batch, fraction, chunk = 256, 0.85, 16384
        elif spec == "mtp":
            max_batch, fraction, chunk = 512, 0.82, 16384
        elif tp >= 8:
            max_batch, fraction, chunk = 128, 0.82, 32768
        else:
            max_batch, fraction, chunk = 32, 0.95, 8192
        recv = "30" if conc >= 16 and tp >= 8 else "10"
        args = ["--scheduler-recv-interval", recv]
    else:
        quant = "mxfp4" if precision == "fp4" else "fp8"
        max_batch, fraction, chunk = 4096, 0.8, 131072
        fp8_mi355x = hw.id == "mi355x" and precision == "fp8"
        args = ["--num-continuous-decode-steps", "8" if fp8_mi355x else "4"]
        args += ["--cuda-graph-max-bs", str(conc) if fp8_mi355x else "128"]
    if hw.vendor == "nvidia" and not disagg:
        args += ["--cuda-graph-max-bs", str(max_batch)]
    settings = Settings(
        max_batch=max_batch,
        max_batched_tokens=chunk,
        chunked_prefill=chunk,
        kv_cache=KvCache(dtype=kv, prefix_caching=False, memory_fraction=fraction),
        speculative=Speculative(method="mtp", draft_tokens=2 if hw.vendor == "nvidia" else 3)
        if spec == "mtp"
        else Speculative(),
        quantization=quant,
    )
    return settings, args


def unpredictable(r: Result, hardware: dict[str, Hardware]) -> str | None:
    """Why the model cannot predict a published result from what it holds (None: it can)."""
    m = r.metrics
    if r.source.kind != "published":
        return "not published"
    if r.model != "deepseek-r1":
        return "another model (the calibration holds DeepSeek-R1 only)"
    if r.engine.name != "sglang":
        return f"engine {r.engine.name} (launch settings known for SGLang only)"
    if r.topology is None or r.load.concurrency is None:
        return "no topology or concurrency"
    if r.workload.isl is None or r.workload.osl is None:
        return "no fixed ISL/OSL"
    if m.output_tok_s_per_gpu is None or m.ttft_ms.p50 is None or m.tpot_ms.p50 is None:
        return "no tok/s/GPU, TTFT p50 or TPOT p50"
    if r.precision not in ("fp8", "fp4"):
        return f"precision {r.precision}"
    if r.hardware not in hardware:
        return f"hardware {r.hardware} not in the catalog"
    return None


def points(results: list[Result], hardware: dict[str, Hardware], disagg: bool) -> list[Point]:
    newest: dict[tuple[object, ...], Result] = {}
    for r in results:
        if unpredictable(r, hardware) is not None:
            continue
        assert r.topology is not None
        aggregated = isinstance(r.topology, AggregatedTopology) and r.engine.orchestrator is None
        if aggregated == disagg:
            continue
        key = (
            r.hardware,
            r.precision,
            r.speculative,
            r.workload.isl,
            r.workload.osl,
            r.topology.model_dump_json(),
            r.engine.orchestrator,
            r.load.concurrency,
        )
        best = newest.get(key)
        if best is None or (str(r.source.at), r.id) > (str(best.source.at), best.id):
            newest[key] = r
    out = []
    for r in sorted(newest.values(), key=lambda r: r.id):
        hw = hardware[r.hardware]
        assert r.topology is not None and r.precision and r.workload.isl and r.workload.osl
        assert r.load.concurrency and r.metrics.output_tok_s_per_gpu is not None
        assert r.metrics.ttft_ms.p50 is not None and r.metrics.tpot_ms.p50 is not None
        tp = r.topology.pools()[0][1].parallel.tp
        io = (r.workload.isl, r.workload.osl)
        settings, args = launch(hw, r.precision, r.speculative, tp, io, r.load.concurrency, disagg)
        recipe = Recipe(
            id=f"calibration/{r.id[:100]}@1",
            model="deepseek-r1",
            engine=EngineRef(name="sglang", version=_version(r.engine.version)),
            hardware=[hw.id],
            topology=r.topology,
            settings=settings,
            args=args,
        )
        out.append(
            Point(
                r,
                recipe,
                hw,
                r.workload.isl,
                r.workload.osl,
                r.load.concurrency,
                r.metrics.output_tok_s_per_gpu,
                r.metrics.ttft_ms.p50,
                r.metrics.tpot_ms.p50,
                disagg,
            )
        )
    return out


def _version(version: str | None) -> str:
    if not version:
        return "0.5.9"
    return version.split(".post")[0]


def run(
    point: Point, model: ModelArch, per_client: int | None, tuning: Tuning | None
) -> Prediction | None:
    c = point.concurrency
    count = default_requests(c, None) if per_client is None else max(per_client * c + c, 30)
    requests = traffic.fixed(point.isl, point.osl, count, RANGE_RATIO)
    try:
        return predict(point.recipe, point.hardware, model, requests, c, tuning=tuning)
    except WeightsDoNotFit:
        return None


def loss(point: Point, p: Prediction | None) -> float:
    if p is None or not p.output_tok_s_per_gpu:
        return 10.0
    return log_loss(
        math.log(p.output_tok_s_per_gpu / point.tput),
        math.log(max(p.ttft_ms.p50, 1e-3) / point.ttft),
        math.log(max(p.tpot_ms.p50, 1e-3) / point.tpot),
    )


def log_loss(tput: float, ttft: float, tpot: float) -> float:
    """The fit's objective for one point from ln(predicted / measured) of each figure: TTFT,
    the noisiest, at half weight."""
    return abs(tput) + abs(tpot) + 0.5 * abs(ttft)


@dataclass(frozen=True)
class Fitted:
    efficiency: dict[str, Efficiency]
    mtp_acceptance: float
    pd_handoff_s: float
    # The results (ids) these constants were fitted on; None: every published point.
    trained_on: frozenset[str] | None = frozenset()


def full_fit() -> Fitted:
    """calibration.py's constants (the fit on every point), clamped to BOUNDS."""
    return Fitted(
        {group: _clamped(e) for group, e in calibration.EFFICIENCY.items()},
        calibration.MTP_ACCEPTANCE,
        calibration.PD_HANDOFF_S,
        trained_on=None,
    )


# Where --cv's refits start: constants that no measurement chose, the same for every GPU, from
# what serving kernels are known to reach — about 40% of dense peak FLOPS in prefill GEMMs,
# 70% of the HBM bandwidth in memory-bound reads, some tens of µs per layer that no roofline
# explains, a few tens of ms per request before the batch — and a middling MTP acceptance and
# P/D hand-off. The cold search's first factor (x1.6) reaches any fitted value in a few sweeps.
PRIOR = {
    "mfu": 0.4,
    "hbm": 0.7,
    "kv_hbm": 0.7,
    "layer_floor_s": 30e-6,
    "request_overhead_s": 0.03,
}
PRIOR_MTP_ACCEPTANCE = 0.6
PRIOR_PD_HANDOFF_S = 0.05


def prior_fit() -> Fitted:
    """PRIOR for every generation (with its vendor's collective latency), fitted on nothing."""
    efficiency = {
        gen: Efficiency(**PRIOR, collective_s=e.collective_s)
        for gen, e in calibration.EFFICIENCY.items()
    }
    return Fitted(efficiency, PRIOR_MTP_ACCEPTANCE, PRIOR_PD_HANDOFF_S, trained_on=frozenset())


# A fit's per-point losses under one candidate, shared by every search of one run (the folds of
# --cv start from the same constants with the same steps, so their candidates coincide).
LossCache = dict[tuple[object, ...], float]


def fit(
    agg: list[Point],
    disagg: list[Point],
    model: ModelArch,
    sweeps: int,
    pool: PoolType,
    start: Fitted | None = None,
    warm: bool = False,
    cache: LossCache | None = None,
    own: frozenset[str] = calibration.OWN_CONSTANTS,
    only: frozenset[str] | None = None,
) -> Fitted:
    """Per constants group (a GPU generation, or a hardware in `own`), its efficiency on its
    aggregated points without MTP; then the MTP acceptance on the aggregated MTP points; then
    the P/D hand-off time on the disaggregated points with at most PD_FIT_MAX_CONCURRENCY
    clients (where TTFT is not queueing). Points above FIT_MAX_CONCURRENCY are left to the
    report. From `start` (default calibration.py's constants); `warm` begins the searches at
    the step a cold search reaches after two fruitless sweeps, for a start already near the
    optimum (--cv's folds); a group the start lacks begins at its generation's constants, cold.
    `only`: search these groups and nothing else (the scalars stay as `start` has them)."""
    chosen = [p for p in agg if p.concurrency <= FIT_MAX_CONCURRENCY]
    current = start or full_fit()
    pd = [p for p in disagg if p.concurrency <= PD_FIT_MAX_CONCURRENCY]
    seen = None if current.trained_on is None else current.trained_on | _ids(chosen + pd)
    cache = {} if cache is None else cache
    step = EFFICIENCY_STEP ** (0.25 if warm else 1)  # warm: two fruitless sweeps in
    scalar_step = SCALAR_STEP ** (0.5 if warm else 1)  # warm: one
    fresh = {_group(p, own) for p in chosen} - set(current.efficiency)
    for p in chosen:  # a hardware newly on its own constants starts from its generation's
        if _group(p, own) in fresh:
            seed = {_group(p, own): current.efficiency[_gen(p)]}
            current = replace(current, efficiency={**current.efficiency, **seed})

    def objective(subset: list[Point], trial: Fitted) -> float:
        if not subset:  # a fold without MTP or P/D points: nothing to fit, the start stays
            return 0.0
        keys = [_cache_key(p, trial, own) for p in subset]
        missing = {k: p for k, p in zip(keys, subset, strict=True) if k not in cache}
        args = [
            (p, model, FIT_REQUESTS_PER_CLIENT, _tuning(trial, p, own)) for p in missing.values()
        ]
        cache.update(zip(missing, pool.starmap(_loss_of, args), strict=True))
        return statistics.fmean(cache[k] for k in keys)

    for group in sorted({_group(p, own) for p in chosen}):
        if only is not None and group not in only:
            continue
        mine = [p for p in chosen if _group(p, own) == group and _fits_efficiency(p)]
        print(f"{group}: {len(mine)} points", file=sys.stderr)

        def score(
            e: Efficiency, mine: list[Point] = mine, group: str = group, base: Fitted = current
        ) -> float:
            return objective(mine, replace(base, efficiency={**base.efficiency, group: e}))

        first = EFFICIENCY_STEP if group in fresh and warm else step
        best = _search(score, current.efficiency[group], sweeps, group, first)
        current = replace(current, efficiency={**current.efficiency, group: best})
    if only is not None:
        return replace(current, trained_on=seen)
    spec = [p for p in chosen if p.result.speculative == "mtp"]
    print(f"mtp: {len(spec)} points", file=sys.stderr)
    acc = _search_scalar(
        lambda a: objective(spec, replace(current, mtp_acceptance=a)),
        current.mtp_acceptance,
        BOUNDS["mtp"],
        sweeps,
        "mtp",
        scalar_step,
    )
    current = replace(current, mtp_acceptance=acc)
    print(f"P/D hand-off: {len(pd)} points", file=sys.stderr)
    handoff = _search_scalar(
        lambda h: objective(pd, replace(current, pd_handoff_s=h)),
        current.pd_handoff_s,
        BOUNDS["pd_handoff_s"],
        sweeps,
        "pd_handoff_s",
        scalar_step,
    )
    return replace(current, pd_handoff_s=handoff, trained_on=seen)


def _ids(pts: list[Point]) -> frozenset[str]:
    return frozenset(p.result.id for p in pts)


def unseen_by(fitted: Fitted, held: list[Point], fold: int) -> None:
    """Refuse constants fitted on any of a fold's held-out points: its errors would be in
    sample in part."""
    seen = fitted.trained_on
    if seen is None or seen & _ids(held):
        some = "every point" if seen is None else ", ".join(sorted(seen & _ids(held))[:3])
        raise ValueError(f"fold {fold + 1}: constants fitted on its held-out points ({some})")


def _cache_key(
    point: Point, fitted: Fitted, own: frozenset[str] = calibration.OWN_CONSTANTS
) -> tuple[object, ...]:
    """What a point's prediction depends on: its group's efficiency, the MTP acceptance if it
    runs MTP, the hand-off if it is disaggregated."""
    return (
        point.result.id,
        fitted.efficiency[_group(point, own)],
        fitted.mtp_acceptance if point.result.speculative == "mtp" else None,
        fitted.pd_handoff_s if point.disagg else None,
    )


def _tuning(
    fitted: Fitted, point: Point, own: frozenset[str] = calibration.OWN_CONSTANTS
) -> Tuning:
    efficiency = fitted.efficiency[_group(point, own)]
    return Tuning(efficiency, fitted.mtp_acceptance, fitted.pd_handoff_s)


def _loss_of(point: Point, model: ModelArch, per_client: int, tuning: Tuning) -> float:
    return loss(point, run(point, model, per_client, tuning))


def _clamped(e: Efficiency) -> Efficiency:
    return replace(e, **{n: min(max(getattr(e, n), BOUNDS[n][0]), BOUNDS[n][1]) for n in PARAMS})


def _fits_efficiency(point: Point) -> bool:
    """Whether the efficiency search fits on the point: without MTP, at most
    FIT_MAX_CONCURRENCY clients."""
    return point.result.speculative != "mtp" and point.concurrency <= FIT_MAX_CONCURRENCY


def _gen(point: Point) -> str:
    return calibration.generation(point.hardware.id, point.hardware.vendor)


def _group(point: Point, own: frozenset[str] = calibration.OWN_CONSTANTS) -> str:
    """Whose constants the point runs on: its hardware's own, or its generation's."""
    return calibration.constants_of(point.hardware.id, point.hardware.vendor, own)


def _search(
    objective: Callable[[Efficiency], float],
    start: Efficiency,
    sweeps: int,
    label: str,
    step: float = EFFICIENCY_STEP,
) -> Efficiency:
    best, best_value = start, objective(start)
    for sweep in range(sweeps):
        moved = False
        for name in PARAMS:
            low, high = BOUNDS[name]
            tried = []
            for factor in (step, 1 / step):
                value = min(max(getattr(best, name) * factor, low), high)
                candidate = replace(best, **{name: value})
                tried.append((objective(candidate), candidate))
            score, candidate = min(tried, key=lambda t: t[0])
            if score < best_value - 1e-4:
                best, best_value, moved = candidate, score, True
        print(f"  {label} sweep {sweep + 1}: loss {best_value:.4f} step x{step:.3f} {best}")
        if not moved:
            step = math.sqrt(step)
            if step < 1.03:
                break
    return best


def _search_scalar(
    objective: Callable[[float], float],
    start: float,
    bounds: tuple[float, float],
    sweeps: int,
    label: str,
    step: float = SCALAR_STEP,
) -> float:
    best, best_value = start, objective(start)
    for sweep in range(sweeps):
        moved = False
        tried = [
            (objective(value), value)
            for value in (min(max(best * f, bounds[0]), bounds[1]) for f in (step, 1 / step))
        ]
        score, value = min(tried)
        if score < best_value - 1e-4:
            best, best_value, moved = value, score, True
        print(f"  {label} sweep {sweep + 1}: loss {best_value:.4f} value {best:.3f}")
        if not moved:
            step = math.sqrt(step)
            if step < 1.02:
                break
    return best


def _predicted(point: Point, model: ModelArch) -> Prediction | None:
    return run(point, model, None, None)


def residuals(
    pts: list[Point], model: ModelArch, verbose: bool, jobs: int = 1
) -> dict[str, list[Errors]]:
    """Each point's absolute relative error of tok/s/GPU, TTFT p50 and TPOT p50 under the
    constants of calibration.py, grouped by hardware and by the summary groups."""
    rows: dict[str, list[Errors]] = {}
    with Pool(jobs) as pool:
        predictions = pool.starmap(_predicted, [(point, model) for point in pts])
    for point, p in zip(pts, predictions, strict=True):
        if p is None:
            print(f"  {point.result.id}: weights do not fit", file=sys.stderr)
            continue
        errs = (
            abs(p.output_tok_s_per_gpu / point.tput - 1),
            abs(p.ttft_ms.p50 / point.ttft - 1),
            abs(p.tpot_ms.p50 / point.tpot - 1),
        )
        for group in _groups(
            point.hardware.id, point.concurrency, point.result.speculative == "mtp"
        ):
            rows.setdefault(group, []).append(errs)
        if verbose:
            print(
                f"{point.result.id:<80} tput {p.output_tok_s_per_gpu:8.1f} / {point.tput:8.1f}"
                f"  ttft {p.ttft_ms.p50:9.1f} / {point.ttft:9.1f}"
                f"  tpot {p.tpot_ms.p50:7.2f} / {point.tpot:7.2f}"
            )
    return rows


BAND_TEXT = {"<=16": "<= 16 clients", "17-63": "17-63 clients", ">=64": ">= 64 clients"}
SUMMARY_ORDER = ("", *BAND_TEXT.values(), "with MTP", "without MTP")


def _groups(hardware: str, concurrency: int, mtp: bool, bands: bool = False) -> list[str]:
    """The error table's groups a point counts in; `bands`: also its hardware's concurrency
    band, the 17-63 band and the points without MTP (the cross-validated tables)."""
    band = BAND_TEXT[band_of(concurrency)]
    groups = [hardware, "all"]
    groups += [f"{hardware}, {band}"] if bands else []
    groups += [f"all, {band}"] if bands or not band.startswith("17") else []
    groups += ["all, with MTP"] if mtp else (["all, without MTP"] if bands else [])
    return groups


def _group_order(group: str) -> tuple[bool, str, int]:
    head, _, tail = group.partition(", ")
    return (head == "all", head, SUMMARY_ORDER.index(tail))


def error_groups(rows: dict[str, list[Errors]]) -> list[ErrorGroup]:
    """Median absolute percentage error per group: hardware first, then the summaries."""
    out = []
    for group in sorted(rows, key=_group_order):
        found = rows[group]
        pct = [round(100 * statistics.median(e[i] for e in found), 1) for i in range(3)]
        out.append(
            ErrorGroup(
                group=group,
                points=len(found),
                tok_s_per_gpu=pct[0],
                ttft_p50=pct[1],
                tpot_p50=pct[2],
            )
        )
    return out


def write_errors(
    agg: list[ErrorGroup],
    disagg: list[ErrorGroup],
    generated: str,
    path: Path,
    held_out: bool = False,
) -> None:
    """An error table: the cross-validated one `denv bench` shows on simulated rows (--cv), or
    the in-sample one (--errors); docs/simulator.md renders both."""
    table = ErrorTable(
        generated=generated,
        engine="sglang",
        model="deepseek-r1",
        held_out=held_out,
        aggregated=tuple(agg),
        disaggregated=tuple(disagg),
    )
    path.write_text(table.model_dump_json(indent=2) + "\n")
    print(f"wrote {path.relative_to(REPO)}", file=sys.stderr)


CV_FOLDS = 5
IN_SAMPLE_PATH = REPO / "reconciler/engines/model" / IN_SAMPLE_FILE
INTERVALS_PATH = REPO / "reconciler/engines/model" / INTERVALS_FILE


def configuration(point: Point) -> str:
    """What makes a recipe here: hardware, precision, MTP, orchestrator and topology (ISL/OSL
    and concurrency are the load). --cv leaves whole configurations out."""
    r = point.result
    assert r.topology is not None
    parts = (r.hardware, r.precision, r.speculative, r.engine.orchestrator)
    return "|".join(map(str, parts)) + "|" + r.topology.model_dump_json()


def folds(pts: list[Point], k: int) -> dict[str, int]:
    """Each configuration's fold: configurations sorted by layout, hardware and key, dealt
    round robin, so that every hardware with k configurations or more is in every fold."""
    configs = sorted({(p.disagg, p.hardware.id, configuration(p)) for p in pts})
    return {c: i % k for i, (_, _, c) in enumerate(configs)}


@dataclass
class CrossValidation:
    residuals: list[Residual]
    unpredicted: list[str]
    fold_seconds: list[float]
    fit_predictions: int
    held_out: bool = True  # False: --frozen, the residuals are in-sample
    folds_done: list[int] = field(default_factory=list)  # saved after each fold (--cv-resume)
    sweeps: int | None = None  # the fits' --sweeps
    own: list[str] = field(default_factory=list)  # the run's OWN_CONSTANTS
    # For each hardware whose other choice (own constants or its generation's) was weighed:
    # its generation's held-out residuals under that other choice.
    alternatives: dict[str, list[Residual]] = field(default_factory=dict)
    fold_constants: list[dict[str, object]] = field(default_factory=list)  # what each fold reached


# A hardware may have constants of its own when it has this many configurations to fit
# (without MTP): in five folds, at least three are left to fit each time.
MIN_OWN_CONFIGURATIONS = 4


def own_candidates(agg: list[Point]) -> list[str]:
    """Hardware for which own constants and its generation's are weighed: every hardware with
    MIN_OWN_CONFIGURATIONS configurations to fit, except the best-measured of its generation,
    which anchors the generation's constants (the GPUs without data, GB200 and GB300 included,
    keep taking those)."""
    chosen = [p for p in agg if _fits_efficiency(p)]
    configs: dict[str, set[str]] = {}
    generation: dict[str, str] = {}
    for p in chosen:
        configs.setdefault(p.hardware.id, set()).add(configuration(p))
        generation[p.hardware.id] = _gen(p)
    out = []
    for hw, mine in sorted(configs.items()):
        rivals = [len(c) for h, c in configs.items() if h != hw and generation[h] == generation[hw]]
        if len(mine) >= MIN_OWN_CONFIGURATIONS and rivals and max(rivals) >= len(mine):
            out.append(hw)
    return out


def cross_validate(
    agg: list[Point],
    disagg: list[Point],
    model: ModelArch,
    k: int,
    sweeps: int,
    jobs: int,
    frozen: bool = False,
    resume: CrossValidation | None = None,
) -> CrossValidation:
    """K folds of whole configurations: refit on the others as --fit does, from PRIOR with the
    cold search's steps (never from constants that saw the fold), predict the held-out ones as
    `denv sim predict` would. `frozen`: no refit, every
    point under the full fit's constants — in-sample residuals, a stand-in for when a machine
    cannot afford the refits (--frozen). `resume`: a saved run's residuals; its folds are
    skipped (--cv-resume)."""
    fold_of = folds(agg + disagg, k)
    cache: LossCache = {}
    cached = 0
    own = calibration.OWN_CONSTANTS
    out = resume or CrossValidation(
        [], [], [], 0, held_out=not frozen, sweeps=sweeps, own=sorted(own)
    )
    assert out.held_out == (not frozen) and out.sweeps == sweeps, "resume with the same settings"
    assert out.own == sorted(own), "resume with the same OWN_CONSTANTS"
    weighed = [] if frozen else own_candidates(agg)
    with Pool(jobs) as pool:
        for fold in range(k):
            began = time.time()
            held = [p for p in agg + disagg if fold_of[configuration(p)] == fold]
            if not held or fold in out.folds_done:  # fewer configurations than folds; resumed
                continue

            def kept(pts: list[Point], fold: int = fold) -> list[Point]:
                return [p for p in pts if fold_of[configuration(p)] != fold]

            if frozen:
                chosen = full_fit()
            else:
                start = prior_fit()
                unseen_by(start, held, fold)
                fitted = fit(kept(agg), kept(disagg), model, sweeps, pool, start, cache=cache)
                unseen_by(fitted, held, fold)
                chosen = _without_unfitted(fitted, kept(agg), held, own)
                out.fold_constants.append(_constants(chosen))
            out.residuals += _held_out(held, chosen, own, model, pool, out.unpredicted)
            for hw in weighed:  # the other choice for hw: refit its generation and hw only
                other = own ^ {hw}
                gen = calibration.generation(hw, _vendor(agg, hw))
                alt = fit(
                    kept(agg),
                    [],
                    model,
                    sweeps,
                    pool,
                    start=fitted,
                    warm=True,
                    cache=cache,
                    own=other,
                    only=frozenset({gen, hw}),
                )
                unseen_by(alt, held, fold)
                alt = _without_unfitted(alt, kept(agg), held, other)
                mine = [p for p in held if _gen(p) == gen]
                out.alternatives.setdefault(hw, []).extend(
                    _held_out(mine, alt, other, model, pool, [])
                )
            out.fold_seconds.append(time.time() - began)
            out.folds_done.append(fold)
            out.fit_predictions += len(cache) - cached
            cached = len(cache)
            save_cv(out)  # each fold as it ends: an interrupted run keeps its folds
            print(
                f"fold {fold + 1}/{k}: {len(held)} points held out, "
                f"{out.fold_seconds[-1]:.0f} s, {len(cache)} fit predictions so far; {chosen}",
                file=sys.stderr,
                flush=True,
            )
    return out


# A generation none of whose configurations is left in a fold (Hopper: one H200 configuration
# without MTP) takes the fold's constants of its vendor's other generation, as a GPU of a
# generation without data would: the full fit's own would carry the held-out points.
SUBSTITUTE = {"hopper": "blackwell", "blackwell": "hopper", "cdna3": "cdna4", "cdna4": "cdna3"}


def _without_unfitted(
    fitted: Fitted, train: list[Point], held: list[Point], own: frozenset[str]
) -> Fitted:
    """A group with no configuration left to fit: a hardware on its own constants takes its
    generation's, a generation its vendor's other generation's."""
    trained = {_group(p, own) for p in train if _fits_efficiency(p)}
    generation_of = {_group(p, own): _gen(p) for p in held}
    efficiency = dict(fitted.efficiency)
    for group in sorted(set(generation_of) - trained):
        gen = generation_of[group]
        instead = gen if group != gen and gen in trained else SUBSTITUTE[gen]
        efficiency[group] = fitted.efficiency[instead]
        print(f"  {group}: no configuration left to fit; {instead}'s", file=sys.stderr)
    return replace(fitted, efficiency=efficiency)


def _held_out(
    held: list[Point],
    fitted: Fitted,
    own: frozenset[str],
    model: ModelArch,
    pool: PoolType,
    unpredicted: list[str],
) -> list[Residual]:
    """The held-out points predicted as `denv sim predict` would, under `fitted`."""
    out = []
    args = [(p, model, None, _tuning(fitted, p, own)) for p in held]
    for point, p in zip(held, pool.starmap(run, args), strict=True):
        if p is None or not p.output_tok_s_per_gpu:
            unpredicted.append(f"{point.result.id}: weights do not fit")
            continue
        out.append(_residual(point, p))
    return out


def _constants(fitted: Fitted) -> dict[str, object]:
    """A fold's constants as JSON: per group its efficiencies, then the two scalars."""
    return {
        "efficiency": {
            group: {name: round(getattr(e, name), 7) for name in PARAMS}
            for group, e in fitted.efficiency.items()
        },
        "mtp_acceptance": round(fitted.mtp_acceptance, 4),
        "pd_handoff_s": round(fitted.pd_handoff_s, 5),
    }


def _vendor(pts: list[Point], hardware_id: str) -> str:
    return next(p.hardware.vendor for p in pts if p.hardware.id == hardware_id)


def _residual(point: Point, p: Prediction) -> Residual:
    return Residual(
        point=point.result.id,
        configuration=configuration(point),
        hardware=point.hardware.id,
        generation=_gen(point),
        engine="sglang",
        mode="disaggregated" if point.disagg else "aggregated",
        concurrency=point.concurrency,
        mtp=point.result.speculative == "mtp",
        output_tok_s_per_gpu=math.log(p.output_tok_s_per_gpu / point.tput),
        ttft_p50_ms=math.log(max(p.ttft_ms.p50, 1e-3) / point.ttft),
        tpot_p50_ms=math.log(max(p.tpot_ms.p50, 1e-3) / point.tpot),
    )


CV_SAVED = REPO / ".cv-residuals.json"  # the last --cv's residuals, for --cv-from


def save_cv(cv: CrossValidation) -> None:
    data = {
        "residuals": [r.model_dump(mode="json") for r in cv.residuals],
        "unpredicted": cv.unpredicted,
        "fold_seconds": cv.fold_seconds,
        "fit_predictions": cv.fit_predictions,
        "held_out": cv.held_out,
        "folds_done": cv.folds_done,
        "sweeps": cv.sweeps,
        "own": cv.own,
        "alternatives": {
            hw: [r.model_dump(mode="json") for r in rs] for hw, rs in cv.alternatives.items()
        },
        "fold_constants": cv.fold_constants,
    }
    CV_SAVED.write_text(json.dumps(data, indent=1))


def load_cv(path: Path) -> CrossValidation:
    data = json.loads(path.read_text())
    residuals = [Residual.model_validate(r) for r in data["residuals"]]
    return CrossValidation(
        residuals,
        data["unpredicted"],
        data["fold_seconds"],
        data["fit_predictions"],
        data.get("held_out", True),
        data.get("folds_done", []),
        data.get("sweeps"),
        data.get("own", []),
        {
            hw: [Residual.model_validate(r) for r in rs]
            for hw, rs in data.get("alternatives", {}).items()
        },
        data.get("fold_constants", []),
    )


def weigh_own(cv: CrossValidation) -> list[Residual]:
    """For each hardware weighed, the held-out loss (the fit's objective) of its generation's
    points, aggregated and disaggregated (GB200 and GB300 take the generation's constants),
    and the median errors of its own under both choices, printed; then the
    residuals of the choice calibration.OWN_CONSTANTS makes now (a --cv run's own, or its
    alternative for a hardware whose choice has flipped since)."""
    now = calibration.OWN_CONSTANTS
    flipped = now ^ frozenset(cv.own)
    if flipped - set(cv.alternatives):
        sys.exit(f"OWN_CONSTANTS differ from the run's on {sorted(flipped)}: run --cv again")
    if len(flipped) > 1:
        sys.exit(f"OWN_CONSTANTS differ from the run's on {sorted(flipped)}: one at a time")
    chosen = list(cv.residuals)
    for hw, alternative in sorted(cv.alternatives.items()):
        gen = next(r.generation for r in alternative)
        ran = [r for r in cv.residuals if r.generation == gen]
        runs_own = hw in cv.own
        by_choice = {runs_own: ran, not runs_own: alternative}
        for own, rs in sorted(by_choice.items()):
            mine = [r for r in rs if r.hardware == hw and r.mode == "aggregated"]
            loss = statistics.fmean(_residual_loss(r) for r in rs)
            medians = " / ".join(
                f"{statistics.median(abs(math.exp(getattr(r, f)) - 1) for r in mine):.0%}"
                for f in FIGURES
            )
            label = f"{hw} on its own constants" if own else f"{hw} on {gen}'s"
            print(
                f"{label}: held-out loss of {gen}'s {len(rs)} points {loss:.4f}; "
                f"{hw}'s {len(mine)} points {medians} (tok/s/GPU / TTFT p50 / TPOT p50)"
            )
        better = min(
            by_choice, key=lambda own: statistics.fmean(map(_residual_loss, by_choice[own]))
        )
        verdict = "own constants" if better else f"{gen}'s"
        print(
            f"{hw}: the held-out error chooses {verdict}; OWN_CONSTANTS has it "
            f"{'on its own' if hw in now else 'with ' + gen}"
        )
        if hw in flipped:
            chosen = [r for r in chosen if r.generation != gen] + alternative
    return chosen


def _residual_loss(r: Residual) -> float:
    return log_loss(r.output_tok_s_per_gpu, r.ttft_p50_ms, r.tpot_p50_ms)


def report_cv(cv: CrossValidation, k: int, write: bool) -> None:
    """The cross-validated error tables, the intervals and their coverage."""
    cv = replace(cv, residuals=weigh_own(cv))
    tables = []
    for mode in ("aggregated", "disaggregated"):
        rows: dict[str, list[Errors]] = {}
        for r in cv.residuals:
            if r.mode != mode:
                continue
            errs = tuple(abs(math.exp(getattr(r, f)) - 1) for f in FIGURES)
            for group in _groups(r.hardware, r.concurrency, r.mtp, bands=True):
                rows.setdefault(group, []).append(errs)  # type: ignore[arg-type]
        tables.append(error_groups(rows))
    judged = unseen(cv.residuals)
    scale = choose_scale(judged)
    cells = cells_of(cv.residuals, scale)
    covered, seen_not = coverage(cv.residuals, cells), unseen_coverage(judged, scale)
    nested = nested_coverage(judged)
    sweeps = f" --sweeps {cv.sweeps}" if cv.sweeps not in (None, SWEEPS) else ""
    command = (
        f"`.venv/bin/python scripts/calibrate_sim.py --cv{sweeps} --write` ({k} folds by "
        "configuration, each refitted without its own)"
        if cv.held_out
        else "`.venv/bin/python scripts/calibrate_sim.py --cv --frozen --write` (no refit)"
    )
    missing = sorted(set(range(k)) - set(cv.folds_done)) if cv.folds_done else []
    if missing:
        print(f"folds {[f + 1 for f in missing]} of {k} not run: --cv-resume to finish them")
    kind = "cross-validated" if cv.held_out else "in-sample (--frozen)"
    for mode, table in zip(("aggregated", "disaggregated"), tables, strict=True):
        print(f"{mode}, {kind}:\n{markdown_table(table)}")
    print(f"intervals widened about their middle by {scale} (least for 80% unseen coverage)")
    print(f"coverage of the 80% intervals, held-out points in their own cell: {covered}")
    print(f"coverage, each configuration against cells built without it: {seen_not}")
    print(f"coverage, the same with the factor chosen on the other folds: {nested}")
    print(f"coverage unwidened, unseen: {unseen_coverage(judged, {})}")
    print(
        f"folds took {', '.join(f'{s:.0f}' for s in cv.fold_seconds)} s; "
        f"{cv.fit_predictions} distinct fit predictions"
    )
    for line in cv.unpredicted:
        print(f"not predicted: {line}")
    if write and missing:
        sys.exit("not writing the error files from an unfinished cross-validation")
    if write:
        generated = f"{dt.date.today()} by {command}"
        if cv.held_out:  # bench's bands; --frozen leaves them to --errors' in-sample file
            write_errors(tables[0], tables[1], generated, ERRORS_PATH, held_out=True)
        intervals = IntervalTable(
            generated=generated,
            engine="sglang",
            model="deepseek-r1",
            min_points=MIN_POINTS,
            held_out=cv.held_out,
            coverage=covered,
            coverage_unseen=seen_not,
            scale=scale,
            coverage_nested=nested,
            cells=tuple(cells),
        )
        INTERVALS_PATH.write_text(intervals.model_dump_json(indent=2) + "\n")
        print(f"wrote {INTERVALS_PATH.relative_to(REPO)}", file=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--fit", action="store_true", help="fit the constants again")
    parser.add_argument("--report", action="store_true", help="errors per hardware")
    parser.add_argument("--disagg", action="store_true", help="the P/D rows instead")
    parser.add_argument("--verbose", action="store_true", help="every point")
    parser.add_argument("--sweeps", type=int, default=SWEEPS)
    parser.add_argument("--jobs", type=int, default=2, help="processes for the fit and the reports")
    parser.add_argument(
        "--errors",
        action="store_true",
        help=f"both in-sample reports; write them to {IN_SAMPLE_PATH.name}",
    )
    parser.add_argument(
        "--cv",
        action="store_true",
        help="cross-validate by configuration; with --write, write the error tables and intervals",
    )
    parser.add_argument("--folds", type=int, default=CV_FOLDS)
    parser.add_argument(
        "--frozen",
        action="store_true",
        help="with --cv: no refits (in-sample residuals; writes the intervals only, marked so)",
    )
    parser.add_argument(
        "--cv-from",
        type=Path,
        help=f"with --cv: report the residuals a --cv saved ({CV_SAVED.name})",
    )
    parser.add_argument(
        "--cv-resume",
        type=Path,
        help="with --cv: continue a saved run, skipping its finished folds (same settings)",
    )
    parser.add_argument(
        "--write",
        action="store_true",
        help="with --fit: write the constants into calibration.py; with --cv: the error files",
    )
    args = parser.parse_args()
    repo = load(REPO)
    model = repo.models["deepseek-r1"]
    hardware = {hw.id: hw for hw in repo.hardware.values()}
    for hw in list(hardware.values()):
        for alias in hw.aliases:
            hardware[alias] = hw
    if args.cv:
        reasons = Counter(unpredictable(r, hardware) for r in repo.results)
        for reason, n in sorted(reasons.items(), key=lambda t: -t[1]):
            print(f"{n:5} results: {reason or 'predictable (before keeping the newest run)'}")
    agg = points(repo.results, hardware, disagg=False)
    disagg = points(repo.results, hardware, disagg=True)
    print(f"{len(agg)} aggregated, {len(disagg)} disaggregated points", file=sys.stderr)
    if args.fit:
        began = time.time()
        with Pool(args.jobs) as pool:
            fitted = fit(agg, disagg, model, args.sweeps, pool)
        print(f"# fitted in {time.time() - began:.0f} s")
        block = _block(fitted, agg, disagg)
        print(block)
        if args.write:
            _write(block)
    if args.cv:
        if args.cv_from:
            cv = load_cv(args.cv_from)
        else:
            resume = load_cv(args.cv_resume) if args.cv_resume else None
            cv = cross_validate(
                agg,
                disagg,
                model,
                args.folds,
                args.sweeps,
                args.jobs,
                frozen=args.frozen,
                resume=resume,
            )
            save_cv(cv)
        report_cv(cv, args.folds, args.write)
    elif args.errors:
        tables = [
            error_groups(residuals(pts, model, args.verbose, args.jobs)) for pts in (agg, disagg)
        ]
        command = "`.venv/bin/python scripts/calibrate_sim.py --errors`"
        write_errors(tables[0], tables[1], f"{dt.date.today()} by {command}", IN_SAMPLE_PATH)
        for mode, table in zip(("aggregated", "disaggregated"), tables, strict=True):
            print(f"{mode}:\n{markdown_table(table)}")
    elif args.report or not args.fit:
        pts = disagg if args.disagg else agg
        table = error_groups(residuals(pts, model, args.verbose, args.jobs))
        print(markdown_table(table))


def _write(block: str) -> None:
    path = REPO / "reconciler/engines/model/calibration.py"
    text = path.read_text()
    begin = text.index("# --- fitted: begin ---")
    end = text.index("# --- fitted: end ---") + len("# --- fitted: end ---")
    path.write_text(text[:begin] + block + text[end:])
    print(f"wrote {path.relative_to(REPO)}", file=sys.stderr)


def _block(fitted: Fitted, agg: list[Point], disagg: list[Point]) -> str:
    n_agg = sum(p.concurrency <= FIT_MAX_CONCURRENCY for p in agg)
    n_pd = sum(p.concurrency <= PD_FIT_MAX_CONCURRENCY for p in disagg)
    lines = [
        "# --- fitted: begin ---",
        f"# Fitted {dt.date.today()} by `.venv/bin/python scripts/calibrate_sim.py --fit --write`",
        f"# on {n_agg} InferenceX SGLang aggregated DeepSeek-R1 points (concurrency <= "
        f"{FIT_MAX_CONCURRENCY}) and,",
        f"# for PD_HANDOFF_S, {n_pd} disaggregated ones (concurrency <= {PD_FIT_MAX_CONCURRENCY}).",
        "EFFICIENCY: dict[str, Efficiency] = {",
    ]
    for gen, e in fitted.efficiency.items():
        vendor = "amd" if gen.startswith("cdna") else "nvidia"
        lines += [
            f'    "{gen}": Efficiency(',
            f"        mfu={e.mfu:.3f},",
            f"        hbm={e.hbm:.3f},",
            f"        kv_hbm={e.kv_hbm:.3f},",
            f"        layer_floor_s={e.layer_floor_s * 1e6:.1f}e-6,",
            f'        collective_s=COLLECTIVE_S["{vendor}"],',
            f"        request_overhead_s={e.request_overhead_s:.4f},",
            "    ),",
        ]
    lines += [
        "}",
        "# Per-draft-token acceptance of DeepSeek MTP on InferenceX's random-token prompts.",
        f"MTP_ACCEPTANCE = {fitted.mtp_acceptance:.3f}",
        "# Fixed time of one P/D hand-off (bootstrap, transfer setup, the decode side taking it",
        "# over).",
        f"PD_HANDOFF_S = {fitted.pd_handoff_s:.4f}",
        "# --- fitted: end ---",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
