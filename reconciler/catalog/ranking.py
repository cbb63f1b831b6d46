"""Pure logic: ranking results for `denv bench` — filter by model, hardware and workload,
keep one point per configuration and concurrency, judge each against the latency target,
pick each configuration's operating point and order them by cost, throughput or speed.

docs/benchmarks.md states these rules for users; keep the two in step.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

from reconciler.catalog.cost import (
    PriceChoice,
    canonical_key,
    default_offers,
    offer_price,
    price_for,
    usd_per_m_output,
)
from reconciler.catalog.latency import Judgement, LatencyTarget, Verdict
from reconciler.catalog.workloads import covered, matches, profile_for
from reconciler.spec.base import Spec
from reconciler.spec.catalog import Offer
from reconciler.spec.recipe import total_gpus
from reconciler.spec.result import Result
from reconciler.spec.workload import WorkloadProfile

RankBy = Literal["cost", "throughput", "speed"]
SourceKind = Literal["published", "measured", "simulated"]
RESULT_PRICE_SOURCE = "result"
_NO_ALIASES: Mapping[str, str] = MappingProxyType({})
_NO_BANDS: Mapping[str, ErrorBand] = MappingProxyType({})
_MET = Judgement(verdict=Verdict.MET)


class ErrorBand(Spec):
    """Where the measured figure falls 8 times in 10 around a simulated one, in percent of
    it: the simulator's 80% interval from its held-out errors (docs/simulator.md, "Errors"),
    the one `denv sim predict` shows for the same recipe, hardware, layout and load."""

    lo_pct: float  # e.g. -12.0: the measured figure may be 12% lower
    hi_pct: float  # e.g. 9.0: or 9% higher
    metric: str  # the figure it applies to: tok/s/GPU, TTFT p50, TPOT p50
    basis: str  # which calibration points, and what they do not cover
    extrapolated: bool  # outside the calibrated family (widened), or a fallback cell

    @property
    def pct(self) -> float:
        """The wider side, in percent."""
        return max(-self.lo_pct, self.hi_pct)

    @property
    def text(self) -> str:
        """e.g. '-12…+9%', '*' when extrapolated."""
        return f"{self.lo_pct:+.0f}…{self.hi_pct:+.0f}%" + ("*" if self.extrapolated else "")


class Row(Spec):
    """One configuration at its chosen operating point. Unknown figures are None."""

    result: str
    model: str
    hardware: str
    recipe: str | None
    engine: str
    precision: str | None
    gpus: int | None
    concurrency: int | None
    isl: int | None
    osl: int | None
    ttft_p99_s: float | None
    tpot_p50_ms: float | None
    tok_s_per_user: float | None  # 1000 / median TPOT
    output_tok_s: float | None
    output_tok_s_per_gpu: float | None  # over every GPU, prefill included
    usd_per_m_output: float | None
    gpu_hour: float | None
    price_source: str | None
    source: SourceKind  # a simulated figure is always labelled so
    url: str | None
    reason: str | None = None  # why the row is missed; None on ranked rows
    band: ErrorBand | None = None  # simulated rows: the error band of the rank figure


class Ranking(Spec):
    ranked: tuple[Row, ...]
    missed: tuple[Row, ...]  # configurations that miss the target or lack the rank figure

    @property
    def rows(self) -> tuple[Row, ...]:
        return self.ranked + self.missed


@dataclass(frozen=True)
class _Point:
    row: Row
    judgement: Judgement
    value: float | None  # the rank figure, None when unknown
    lacking: str  # why the rank figure is unknown


def rank(
    results: Iterable[Result],
    *,
    profiles: Sequence[WorkloadProfile],
    offers: Sequence[Offer],
    hardware_aliases: Mapping[str, str],
    workload: str | None,
    target: LatencyTarget | None,
    model: str | None,
    hardware: str | None,
    by: RankBy,
    prices: Mapping[str, float],
    model_aliases: Mapping[str, str] = _NO_ALIASES,
    bands: Mapping[str, ErrorBand] = _NO_BANDS,
) -> Ranking:
    """Rank configurations; the rules are in docs/benchmarks.md ("How a configuration's
    operating point is chosen"). Aliases map alias -> catalog id, in any case. `bands` gives
    simulated results (by id) the error band of the rank figure. A simulated result is left
    out where a published or measured result of its recipe, hardware and workload exists."""
    hw_aliases = {k.lower(): v.lower() for k, v in hardware_aliases.items()}
    model_map = {k.lower(): v.lower() for k, v in model_aliases.items()}
    profile = profile_for(workload, profiles) if workload is not None else None
    if profile is not None and profile.throughput_only:
        target = None
    wanted_hw = canonical_key(hardware, hw_aliases) if hardware else None
    wanted_model = canonical_key(model, model_map) if model else None

    known = [p.id for p in profiles]
    results = tuple(results)
    done = covered(results, profiles, lambda key: canonical_key(key, hw_aliases))

    def keep(result: Result) -> bool:
        return (
            (wanted_model is None or canonical_key(result.model, model_map) == wanted_model)
            and (wanted_hw is None or canonical_key(result.hardware, hw_aliases) == wanted_hw)
            and (profile is None or matches(profile, result, known))
            and not _superseded(result, done, hw_aliases)
        )

    def config_key(result: Result) -> Hashable:
        return _config_key(result, hw_aliases, model_map)

    # The same prices: each hardware's default offer's, found once (by catalog id).
    offered = {
        offer.hardware: offer_price(offer.hardware, (offer,))
        for offer in default_offers(offers, hw_aliases)
    }
    points: dict[Hashable, list[_Point]] = {}
    for key, result in _newest_per_point(filter(keep, results), config_key):
        point = _point(result, target, by, prices, offered, hw_aliases, bands.get(result.id))
        points.setdefault(key, []).append(point)
    ranked: list[_Point] = []
    missed: list[tuple[_Point, str]] = []
    for config_points in points.values():
        chosen, reason = _operating_point(config_points)
        if reason is None:
            ranked.append(chosen)
        else:
            missed.append((chosen, reason))
    ranked.sort(key=_order)
    missed.sort(key=lambda item: _closeness(item[0]))
    return Ranking(
        ranked=tuple(p.row for p in ranked),
        missed=tuple(p.row.model_copy(update={"reason": reason}) for p, reason in missed),
    )


def _superseded(
    result: Result, done: set[tuple[str, str, str]], hw_aliases: Mapping[str, str]
) -> bool:
    """A simulated result of a recipe, hardware and workload that a published or measured
    result also covers: that one wins."""
    if result.source.kind != "simulated" or result.workload.name is None:
        return False
    hardware = canonical_key(result.hardware, hw_aliases)
    return (result.recipe.id or "", hardware, result.workload.name.lower()) in done


def _closeness(point: _Point) -> tuple[float, tuple[int, float, str]]:
    """Near misses first: met-but-unranked (ratio 0), then by how far the worst objective is
    over its limit, then figures missing; ties in rank order."""
    if point.judgement.met:
        return (0.0, _order(point))
    ratio = point.judgement.worst_ratio
    return (ratio if ratio is not None else float("inf"), _order(point))


def _config_key(
    result: Result, hw_aliases: Mapping[str, str], model_map: Mapping[str, str]
) -> Hashable:
    """What makes a configuration: everything but the load."""
    return (
        canonical_key(result.model, model_map),
        canonical_key(result.hardware, hw_aliases),
        result.engine.name,
        result.engine.version,
        result.engine.orchestrator,
        result.precision,
        result.speculative,
        result.recipe.id,
        result.topology.model_dump_json() if result.topology is not None else None,
        result.gpus,
        result.workload.isl,
        result.workload.osl,
        result.workload.traffic_digest,
        result.source.kind,
    )


def _newest_per_point(
    results: Iterable[Result], config_key: Callable[[Result], Hashable]
) -> list[tuple[Hashable, Result]]:
    """One result per configuration and load: the newest `source.at` (then the greatest id),
    with its configuration's key."""
    newest: dict[Hashable, tuple[Hashable, Result]] = {}
    for result in results:
        config = config_key(result)
        key = (config, result.load.concurrency, result.load.rate)
        held = newest.get(key)
        if held is None or _recency(result) > _recency(held[1]):
            newest[key] = (config, result)
    return list(newest.values())


def _recency(result: Result) -> tuple[dt.date, str]:
    return (result.source.at or dt.date.min, result.id)


def _operating_point(points: list[_Point]) -> tuple[_Point, str | None]:
    """The best point that meets the target and has the rank figure (reason None); else the
    point to show as missed and why."""
    met = sorted((p for p in points if p.judgement.met), key=_order)
    if met:
        best = met[0]
        return best, (best.lacking if best.value is None else None)
    judged = [p for p in points if p.judgement.verdict is Verdict.MISSED]
    if judged:
        closest = min(judged, key=lambda p: (p.judgement.worst_ratio or 0.0, _order(p)))
    else:
        closest = min(points, key=_order)
    return closest, closest.judgement.reason


def _order(point: _Point) -> tuple[int, float, str]:
    return _sort_key(point.value, point.row)


def _sort_key(value: float | None, row: Row) -> tuple[int, float, str]:
    """Best first: the rank figure where known; else the most output per GPU; then the id."""
    if value is not None:
        return (0, value, row.result)
    return (1, -(row.output_tok_s_per_gpu or 0.0), row.result)


def _rank_value(row: Row, by: RankBy) -> float | None:
    """The figure to sort by, signed so that smaller is better."""
    if by == "cost":
        return row.usd_per_m_output
    figure = row.output_tok_s_per_gpu if by == "throughput" else row.tok_s_per_user
    return None if figure is None else -figure


def _lacking(row: Row, by: RankBy) -> str:
    if by == "throughput":
        return "no output tok/s per GPU in this result"
    if by == "speed":
        return "no TPOT p50 in this result"
    if row.gpus is None:
        return "no GPU count in this result"
    if not row.output_tok_s:
        return "no output tok/s in this result"
    return f"no price for {row.hardware} (give --price {row.hardware}=USD)"


def _point(
    result: Result,
    target: LatencyTarget | None,
    by: RankBy,
    prices: Mapping[str, float],
    offered: Mapping[str, PriceChoice | None],
    hw_aliases: Mapping[str, str],
    band: ErrorBand | None,
) -> _Point:
    row = _row(result, prices, offered, hw_aliases)
    if band is not None and result.source.kind == "simulated":
        row = row.model_copy(update={"band": band})
    judgement = target.judge(result.metrics) if target is not None else _MET
    return _Point(
        row=row, judgement=judgement, value=_rank_value(row, by), lacking=_lacking(row, by)
    )


def _row(
    result: Result,
    prices: Mapping[str, float],
    offered: Mapping[str, PriceChoice | None],
    hw_aliases: Mapping[str, str],
) -> Row:
    metrics = result.metrics
    gpus = result.gpus
    if gpus is None and result.topology is not None:
        gpus = total_gpus(result.topology)
    out, per_gpu = metrics.output_tok_s, metrics.output_tok_s_per_gpu
    if out is None and per_gpu is not None and gpus:
        out = per_gpu * gpus
    if per_gpu is None and out is not None and gpus:
        per_gpu = out / gpus
    tpot, ttft = metrics.tpot_ms.p50, metrics.ttft_ms.p99
    hardware = canonical_key(result.hardware, hw_aliases)
    usd, gpu_hour, price_source = _cost(result, gpus, out, prices, offered, hw_aliases)
    engine = " ".join(filter(None, (result.engine.name, result.engine.version)))
    if result.engine.orchestrator:
        engine += f" ({result.engine.orchestrator})"
    return Row(
        result=result.id,
        model=result.model,
        hardware=hardware,
        recipe=result.recipe.id,
        engine=engine,
        precision=result.precision,
        gpus=gpus,
        concurrency=result.load.concurrency,
        isl=result.workload.isl,
        osl=result.workload.osl,
        ttft_p99_s=None if ttft is None else round(ttft / 1000, 6),
        tpot_p50_ms=tpot,
        tok_s_per_user=1000 / tpot if tpot else None,
        output_tok_s=out,
        output_tok_s_per_gpu=per_gpu,
        usd_per_m_output=usd,
        gpu_hour=gpu_hour,
        price_source=price_source,
        source=result.source.kind,
        url=result.source.url,
    )


def _cost(
    result: Result,
    gpus: int | None,
    output_tok_s: float | None,
    prices: Mapping[str, float],
    offered: Mapping[str, PriceChoice | None],
    hw_aliases: Mapping[str, str],
) -> tuple[float | None, float | None, str | None]:
    """($/M output, $/GPU-hour, price source). A result's own $/M output stands unless the
    user gave --price for its hardware."""
    hardware = canonical_key(result.hardware, hw_aliases)
    user_priced = any(canonical_key(k, hw_aliases) == hardware for k in prices)
    if result.usd_per_m_output is not None and not user_priced:
        own = result.price
        return (
            result.usd_per_m_output,
            own.gpu_hour if own else None,
            own.source if own else RESULT_PRICE_SOURCE,
        )
    choice = price_for(result, prices, (), aliases=hw_aliases) or offered.get(hardware)
    if choice is None:
        return None, None, None
    usd = None
    if gpus and output_tok_s:
        usd = usd_per_m_output(gpus, choice.gpu_hour, output_tok_s)
    return usd, choice.gpu_hour, choice.source
