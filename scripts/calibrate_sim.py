#!/usr/bin/env python3
"""Calibrate denv's simulator on published measurements, or report how well it matches them.

    .venv/bin/python scripts/calibrate_sim.py --report        # errors of calibration.py's constants
    .venv/bin/python scripts/calibrate_sim.py --fit --write   # fit them again, write them
    .venv/bin/python scripts/calibrate_sim.py --report --disagg   # the P/D rows instead
    .venv/bin/python scripts/calibrate_sim.py --errors   # both; write the error bands

Points: the InferenceX DeepSeek-R1-0528 rows of results/published/inferencex.jsonl served by
plain SGLang, aggregated (fixed ISL/OSL drawn from [0.8 L, L], closed-loop concurrency), the
newest run of each configuration and concurrency. Each point is predicted with
`reconciler.engines.sim.predict` exactly as `denv sim predict` would, from a recipe rebuilt
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
import math
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from multiprocessing import Pool
from pathlib import Path
from typing import Literal

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from reconciler.cli.common import load  # noqa: E402
from reconciler.engines.sim import calibration, traffic  # noqa: E402
from reconciler.engines.sim.calibration import Efficiency, Tuning  # noqa: E402
from reconciler.engines.sim.error_bands import (  # noqa: E402
    ERRORS_FILE,
    ErrorGroup,
    ErrorTable,
    markdown_table,
)
from reconciler.engines.sim.perf import WeightsDoNotFit  # noqa: E402
from reconciler.engines.sim.predict import default_requests, predict  # noqa: E402
from reconciler.engines.sim.stats import Prediction  # noqa: E402
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
PD_FIT_MAX_CONCURRENCY = 8
ERRORS_PATH = REPO / "reconciler/engines/sim" / ERRORS_FILE
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


def points(results: list[Result], hardware: dict[str, Hardware], disagg: bool) -> list[Point]:
    newest: dict[tuple[object, ...], Result] = {}
    for r in results:
        m = r.metrics
        if (
            r.source.kind != "published"
            or r.model != "deepseek-r1"
            or r.engine.name != "sglang"
            or r.topology is None
            or r.load.concurrency is None
            or r.workload.isl is None
            or r.workload.osl is None
            or m.output_tok_s_per_gpu is None
            or m.ttft_ms.p50 is None
            or m.tpot_ms.p50 is None
            or r.precision not in ("fp8", "fp4")
            or r.hardware not in hardware
        ):
            continue
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
    return (
        abs(math.log(p.output_tok_s_per_gpu / point.tput))
        + abs(math.log(max(p.tpot_ms.p50, 1e-3) / point.tpot))
        + 0.5 * abs(math.log(max(p.ttft_ms.p50, 1e-3) / point.ttft))
    )


@dataclass(frozen=True)
class Fitted:
    efficiency: dict[str, Efficiency]
    mtp_acceptance: float
    pd_handoff_s: float


def fit(agg: list[Point], disagg: list[Point], model: ModelArch, sweeps: int, jobs: int) -> Fitted:
    """Per GPU generation, its efficiency on its aggregated points without MTP; then the MTP
    acceptance on the aggregated MTP points; then the P/D hand-off time on the disaggregated
    points with at most PD_FIT_MAX_CONCURRENCY clients (where TTFT is not queueing). Points
    above FIT_MAX_CONCURRENCY are left to the report."""
    chosen = [p for p in agg if p.concurrency <= FIT_MAX_CONCURRENCY]
    current = Fitted(
        {gen: _clamped(e) for gen, e in calibration.EFFICIENCY.items()},
        calibration.MTP_ACCEPTANCE,
        calibration.PD_HANDOFF_S,
    )
    with Pool(jobs) as pool:

        def objective(subset: list[Point], trial: Fitted) -> float:
            args = [(p, model, FIT_REQUESTS_PER_CLIENT, _tuning(trial, p)) for p in subset]
            return statistics.fmean(pool.starmap(_loss_of, args))

        for gen in sorted({_gen(p) for p in chosen}):
            own = [p for p in chosen if _gen(p) == gen and p.result.speculative != "mtp"]
            print(f"{gen}: {len(own)} points", file=sys.stderr)

            def score(
                e: Efficiency, own: list[Point] = own, gen: str = gen, base: Fitted = current
            ) -> float:
                return objective(own, replace(base, efficiency={**base.efficiency, gen: e}))

            best = _search(score, current.efficiency[gen], sweeps, label=gen)
            current = replace(current, efficiency={**current.efficiency, gen: best})
        spec = [p for p in chosen if p.result.speculative == "mtp"]
        print(f"mtp: {len(spec)} points", file=sys.stderr)
        acc = _search_scalar(
            lambda a: objective(spec, replace(current, mtp_acceptance=a)),
            current.mtp_acceptance,
            BOUNDS["mtp"],
            sweeps,
            "mtp",
        )
        current = replace(current, mtp_acceptance=acc)
        pd = [p for p in disagg if p.concurrency <= PD_FIT_MAX_CONCURRENCY]
        print(f"P/D hand-off: {len(pd)} points", file=sys.stderr)
        handoff = _search_scalar(
            lambda h: objective(pd, replace(current, pd_handoff_s=h)),
            current.pd_handoff_s,
            BOUNDS["pd_handoff_s"],
            sweeps,
            "pd_handoff_s",
        )
    return replace(current, pd_handoff_s=handoff)


def _tuning(fitted: Fitted, point: Point) -> Tuning:
    return Tuning(fitted.efficiency[_gen(point)], fitted.mtp_acceptance, fitted.pd_handoff_s)


def _loss_of(point: Point, model: ModelArch, per_client: int, tuning: Tuning) -> float:
    return loss(point, run(point, model, per_client, tuning))


def _clamped(e: Efficiency) -> Efficiency:
    return replace(e, **{n: min(max(getattr(e, n), BOUNDS[n][0]), BOUNDS[n][1]) for n in PARAMS})


def _gen(point: Point) -> str:
    return calibration.generation(point.hardware.id, point.hardware.vendor)


def _search(
    objective: Callable[[Efficiency], float], start: Efficiency, sweeps: int, label: str
) -> Efficiency:
    best, best_value = start, objective(start)
    step = 1.6
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
) -> float:
    best, best_value, step = start, objective(start), 1.4
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
        groups = [point.hardware.id, "all"]
        groups += ["all, with MTP"] if point.result.speculative == "mtp" else []
        groups += ["all, <= 16 clients"] if point.concurrency <= 16 else []
        groups += ["all, >= 64 clients"] if point.concurrency >= 64 else []
        for group in groups:
            rows.setdefault(group, []).append(errs)
        if verbose:
            print(
                f"{point.result.id:<80} tput {p.output_tok_s_per_gpu:8.1f} / {point.tput:8.1f}"
                f"  ttft {p.ttft_ms.p50:9.1f} / {point.ttft:9.1f}"
                f"  tpot {p.tpot_ms.p50:7.2f} / {point.tpot:7.2f}"
            )
    return rows


def error_groups(rows: dict[str, list[Errors]]) -> list[ErrorGroup]:
    """Median absolute percentage error per group: hardware first, then the summaries."""
    out = []
    for group in sorted(rows, key=lambda k: (k.startswith("all"), k)):
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


def write_errors(agg: list[ErrorGroup], disagg: list[ErrorGroup]) -> None:
    """The error bands `denv bench` shows on simulated rows, and docs/simulator.md's tables."""
    table = ErrorTable(
        generated=f"{dt.date.today()} by `.venv/bin/python scripts/calibrate_sim.py --errors`",
        engine="sglang",
        model="deepseek-r1",
        aggregated=tuple(agg),
        disaggregated=tuple(disagg),
    )
    ERRORS_PATH.write_text(table.model_dump_json(indent=2) + "\n")
    print(f"wrote {ERRORS_PATH.relative_to(REPO)}", file=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--fit", action="store_true", help="fit the constants again")
    parser.add_argument("--report", action="store_true", help="errors per hardware")
    parser.add_argument("--disagg", action="store_true", help="the P/D rows instead")
    parser.add_argument("--verbose", action="store_true", help="every point")
    parser.add_argument("--sweeps", type=int, default=12)
    parser.add_argument("--jobs", type=int, default=2, help="processes for the fit and the reports")
    parser.add_argument(
        "--errors",
        action="store_true",
        help=f"both reports; write the error bands to {ERRORS_PATH.relative_to(REPO)}",
    )
    parser.add_argument(
        "--write", action="store_true", help="with --fit: write the constants into calibration.py"
    )
    args = parser.parse_args()
    repo = load(REPO)
    model = repo.models["deepseek-r1"]
    hardware = {hw.id: hw for hw in repo.hardware.values()}
    for hw in list(hardware.values()):
        for alias in hw.aliases:
            hardware[alias] = hw
    agg = points(repo.results, hardware, disagg=False)
    disagg = points(repo.results, hardware, disagg=True)
    print(f"{len(agg)} aggregated, {len(disagg)} disaggregated points", file=sys.stderr)
    if args.fit:
        began = time.time()
        fitted = fit(agg, disagg, model, args.sweeps, args.jobs)
        print(f"# fitted in {time.time() - began:.0f} s")
        block = _block(fitted, agg, disagg)
        print(block)
        if args.write:
            _write(block)
    if args.errors:
        tables = [
            error_groups(residuals(pts, model, args.verbose, args.jobs)) for pts in (agg, disagg)
        ]
        write_errors(*tables)
        for mode, table in zip(("aggregated", "disaggregated"), tables, strict=True):
            print(f"{mode}:\n{markdown_table(table)}")
    elif args.report or not args.fit:
        pts = disagg if args.disagg else agg
        table = error_groups(residuals(pts, model, args.verbose, args.jobs))
        print(markdown_table(table))


def _write(block: str) -> None:
    path = REPO / "reconciler/engines/sim/calibration.py"
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
