"""Pure logic: latency targets (`--latency 'ttft:p99<1.5s; itl:p95<50ms'`) — parsing them and
judging a result's metrics against them.

Grammar, one or more parts joined by `;` or `,` (spaces allowed anywhere between tokens):

    part   := [metric ":"] stat ("<" | "<=") number unit
    metric := ttft | tpot | itl | e2e            (ttft when left out)
    stat   := p50 | median | p90 | p95 | p99 | mean
    unit   := s | ms
"""

from __future__ import annotations

import re
from collections.abc import Callable
from enum import StrEnum
from typing import Literal

from pydantic import Field

from reconciler.errors import UsageError
from reconciler.spec.base import Spec
from reconciler.spec.result import Metrics, Percentiles

MetricName = Literal["ttft", "tpot", "itl", "e2e"]
StatName = Literal["p50", "p90", "p95", "p99", "mean"]

METRICS: dict[str, MetricName] = {"ttft": "ttft", "tpot": "tpot", "itl": "itl", "e2e": "e2e"}
STATS: dict[str, StatName] = {
    "p50": "p50",
    "median": "p50",
    "p90": "p90",
    "p95": "p95",
    "p99": "p99",
    "mean": "mean",
}
_UNITS_MS = {"s": 1000.0, "ms": 1.0}
_LIMIT = re.compile(r"^([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([a-zA-Z]*)$")
_EXAMPLE = "e.g. 'p99<1.5s' or 'ttft:p99<1.5s; itl:p95<50ms'"

_SERIES: dict[MetricName, Callable[[Metrics], Percentiles]] = {
    "ttft": lambda m: m.ttft_ms,
    "tpot": lambda m: m.tpot_ms,
    "itl": lambda m: m.itl_ms,
    "e2e": lambda m: m.e2e_ms,
}
_STAT: dict[StatName, Callable[[Percentiles], float | None]] = {
    "p50": lambda p: p.p50,
    "p90": lambda p: p.p90,
    "p95": lambda p: p.p95,
    "p99": lambda p: p.p99,
    "mean": lambda p: p.mean,
}


def _number(value: float, decimals: int) -> str:
    text = f"{value:.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def format_ms(ms: float, *, seconds: bool | None = None) -> str:
    """'1.5 s' for 1500, '50 ms' for 50; `seconds` forces the unit."""
    if seconds is None:
        seconds = ms >= 1000
    return f"{_number(ms / 1000, 3)} s" if seconds else f"{_number(ms, 1)} ms"


class Slo(Spec):
    """One objective: the statistic of a latency metric stays under max_ms."""

    metric: MetricName
    stat: StatName
    max_ms: float = Field(gt=0)

    @property
    def label(self) -> str:
        return f"{self.metric.upper()} {self.stat}"

    def figure(self, metrics: Metrics) -> float | None:
        """The result's value for this objective, in ms; None when the result lacks it."""
        return _STAT[self.stat](_SERIES[self.metric](metrics))

    def __str__(self) -> str:
        ms = self.max_ms
        limit = f"{_number(ms / 1000, 6)}s" if ms >= 1000 else f"{_number(ms, 3)}ms"
        return f"{self.metric}:{self.stat}<{limit}"


class Verdict(StrEnum):
    MET = "met"
    MISSED = "missed"
    MISSING = "missing"  # the result lacks a figure the target needs


class Judgement(Spec):
    verdict: Verdict
    reason: str | None = None  # why not met; None when met
    # the largest value/limit ratio over the objectives (above 1 misses); None when missing
    worst_ratio: float | None = None

    @property
    def met(self) -> bool:
        return self.verdict is Verdict.MET


class LatencyTarget(Spec):
    """Every objective must hold for a result to meet the target."""

    slos: tuple[Slo, ...] = Field(min_length=1)

    def __str__(self) -> str:
        return ", ".join(str(slo) for slo in self.slos)

    def judge(self, metrics: Metrics) -> Judgement:
        misses: list[str] = []
        missing: list[str] = []
        worst = 0.0
        for slo in self.slos:
            value = slo.figure(metrics)
            if value is None:
                missing.append(f"no {slo.label} in this result")
                continue
            worst = max(worst, value / slo.max_ms)
            if value > slo.max_ms:
                seconds = slo.max_ms >= 1000
                misses.append(
                    f"{slo.label} {format_ms(value, seconds=seconds)} > "
                    f"{format_ms(slo.max_ms, seconds=seconds)}"
                )
        if misses:
            return Judgement(verdict=Verdict.MISSED, reason="; ".join(misses), worst_ratio=worst)
        if missing:
            return Judgement(verdict=Verdict.MISSING, reason="; ".join(missing))
        return Judgement(verdict=Verdict.MET, worst_ratio=worst)


def parse_latency_target(text: str) -> LatencyTarget:
    """Parse `--latency`; any malformed part raises UsageError naming that part."""
    parts = [part.strip() for part in re.split(r"[;,]", text)]
    if not any(parts):
        raise UsageError(f"latency target '{text}': empty ({_EXAMPLE})")
    slos: list[Slo] = []
    for part in filter(None, parts):
        slo = _parse_part(part)
        if any((s.metric, s.stat) == (slo.metric, slo.stat) for s in slos):
            raise UsageError(f"latency target '{part}': {slo.label} is given twice")
        slos.append(slo)
    return LatencyTarget(slos=tuple(slos))


def _parse_part(part: str) -> Slo:
    def bad(why: str) -> UsageError:
        return UsageError(f"latency target '{part}': {why}")

    if "<" not in part:
        if ">" in part:
            raise bad("a target is an upper bound: use '<' (e.g. p99<1.5s)")
        raise bad("missing '<limit>' (e.g. p99<1.5s)")
    left, _, right = part.partition("<")
    right = right.removeprefix("=").strip()
    metric_text, _, stat_text = left.rpartition(":")
    metric_text = metric_text.strip().lower() or "ttft"
    stat_text = stat_text.strip().lower()
    if metric_text not in METRICS:
        raise bad(f"unknown metric '{metric_text}' (use ttft, tpot, itl or e2e)")
    if not stat_text:
        raise bad("missing the percentile before '<' (use p50, p90, p95, p99 or mean)")
    if stat_text not in STATS:
        raise bad(f"unknown percentile '{stat_text}' (use p50, p90, p95, p99 or mean)")
    return Slo(metric=METRICS[metric_text], stat=STATS[stat_text], max_ms=_parse_limit(right, bad))


def _parse_limit(text: str, bad: Callable[[str], UsageError]) -> float:
    if not text:
        raise bad("missing the limit after '<' (e.g. 1.5s or 50ms)")
    match = _LIMIT.match(text)
    if not match:
        raise bad(f"limit '{text}' is not a number with a unit (e.g. 1.5s or 50ms)")
    number, unit = float(match.group(1)), match.group(2).lower()
    if not unit:
        raise bad(f"limit '{text}' has no unit (use s or ms, e.g. {match.group(1)}s)")
    if unit not in _UNITS_MS:
        raise bad(f"unknown unit '{match.group(2)}' in '{text}' (use s or ms)")
    if number <= 0:
        raise bad(f"limit '{text}' must be above zero")
    return number * _UNITS_MS[unit]
