"""benchmarks/autoscale.py's pure parts: the day-shaped trace, the replica start-up model, and
the figures of a stage (GPU-hours, SLO attainment, scale events, flaps, pending time).

The day: a smooth curve with its trough at 04:00 and its top at 16:00, the trough 1/8 of
the top, and three bursts (09:30 for 24 minutes ×1.8, 14:30 for 30 minutes ×1.25, 20:00
for 18 minutes ×1.7), so the highest rate is about 9.5 times the lowest. The day is
compressed `scale` times (a day in `86400 / scale` seconds) keeping each instant's arrival
rate: the trace is the day's Poisson arrivals thinned to 1/scale, so a replica sees the
load it would at that hour, and the count follows the day in minutes. Lengths are the
catalog's `chat` workload (512±128 tokens in, 256±64 out, a shared system prompt), as
Mooncake-style lines (timestamp ms, input_length, output_length, hash_ids).
"""

from __future__ import annotations

import itertools
import math
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from reconciler.bench.metrics import tpot, ttft
from reconciler.bench.records import RequestRecord
from reconciler.bench.traffic import TraceLine, generate
from reconciler.spec.catalog import ModelArch
from reconciler.spec.workload import WorkloadProfile

DAY_S = 86_400.0
TROUGH = 1 / 8  # the base curve's lowest rate, as a share of its highest
BURSTS = ((9.5, 0.4, 1.8), (14.5, 0.5, 1.25), (20.0, 0.3, 1.7))  # hour, hours, factor
# Start-up of a real replica: its weights read from local NVMe, then the engine's own start
# (CUDA graphs, compile, warm-up). The catalog has neither figure; these are stated here.
DISK_GB_S = 2.0  # a local NVMe read, GB/s
ENGINE_INIT_S = 60.0  # vLLM's start past the weights on an H100/H200-class GPU, seconds
SCALE_LINE = re.compile(r"scale (\S+): (\d+) → (\d+) \((.*)\)")


def day_rate(hour: float) -> float:
    """The day's arrival rate at `hour` (0–24), relative to the base curve's top."""
    base = TROUGH + (1 - TROUGH) * ((1 - math.cos(2 * math.pi * (hour - 4) / 24)) / 2) ** 1.5
    for at, hours, factor in BURSTS:
        if at <= hour < at + hours:
            base *= factor
    return base


def _curve_extremes() -> tuple[float, float, float]:
    """The curve's highest, lowest and mean over the day (a minute's steps)."""
    values = [day_rate(minute / 60) for minute in range(24 * 60)]
    return max(values), min(values), sum(values) / len(values)


TOP, BOTTOM, MEAN = _curve_extremes()


def rate_at(t: float, seconds: float, peak_rps: float) -> float:
    """Requests/s at `t` seconds into a day replayed in `seconds`, its top at `peak_rps`."""
    return peak_rps * day_rate(24 * (t % seconds) / seconds) / TOP


def trace(
    seconds: float, peak_rps: float, profiles: Mapping[str, WorkloadProfile], seed: int = 0
) -> list[TraceLine]:
    """The day's requests in `seconds`: Poisson arrivals thinned to the day's rate, chat
    lengths; timestamps in ms from the start of the replay."""
    rng = random.Random(f"{seed}:day")
    stamps: list[int] = []
    t = 0.0
    while True:
        t += rng.expovariate(peak_rps)
        if t >= seconds:
            break
        if rng.random() * peak_rps < rate_at(t, seconds, peak_rps):
            stamps.append(round(t * 1000))
    made = generate("chat", max(1, len(stamps)), seed, profiles=profiles)
    return [
        line.model_copy(update={"timestamp": stamp})
        for line, stamp in zip(made, stamps, strict=False)
    ]


def startup_s(model: ModelArch) -> float:
    """Seconds a real replica takes to start (uncompressed): BF16 weights over the disk, plus
    the engine's own start."""
    return model.params_b * 2 / DISK_GB_S + ENGINE_INIT_S


@dataclass(frozen=True)
class Slo:
    ttft_s: float
    itl_s: float  # each request's mean inter-token latency (TPOT)

    def met(self, record: RequestRecord) -> bool:
        """Answered, its first token within the TTFT target and its mean ITL within the ITL
        target: a failed request is a miss."""
        if not record.ok or not record.chunks_s:
            return False
        per_token = tpot(record)
        return ttft(record) <= self.ttft_s and (per_token is None or per_token <= self.itl_s)


def attainment(slo: Slo, records: Sequence[RequestRecord], sent: int) -> float:
    """Share of the `sent` requests that met the SLO (one never recorded is a miss)."""
    return sum(slo.met(r) for r in records) / sent if sent else 1.0


def gpu_seconds(samples: Sequence[tuple[float, int]], end: float) -> float:
    """GPU-seconds from (time, GPUs held) samples, each held until the next (or `end`)."""
    total = 0.0
    for (at, gpus), (after, _) in zip(samples, [*samples[1:], (end, 0)], strict=True):
        total += gpus * max(0.0, min(after, end) - at)
    return total


def scale_events(lines: Sequence[tuple[float, str]]) -> list[tuple[float, int, int]]:
    """(time, from, to) of each `scale …: a → b (…)` line of a bot's output."""
    found = []
    for at, text in lines:
        match = SCALE_LINE.search(text)
        if match:
            found.append((at, int(match.group(2)), int(match.group(3))))
    return found


def flaps(events: Sequence[tuple[float, int, int]], down_delay: float) -> int:
    """Reversals: a change in the other direction from the one before it, within the
    policy's down delay of it."""
    count = 0
    for (at, a, b), (then, c, d) in itertools.pairwise(events):
        if (b - a) * (d - c) < 0 and then - at < down_delay:
            count += 1
    return count


def pending_seconds(
    asked: Sequence[tuple[float, int]], placed: Sequence[tuple[float, int]], end: float
) -> float:
    """Time the count asked for (stepwise from `asked`) was more than the replicas placed on
    the fleet (stepwise from the samples in `placed`)."""
    marks = sorted({t for t, _ in asked} | {t for t, _ in placed} | {end})
    total = 0.0
    for at, after in itertools.pairwise(marks):
        if _step(asked, at) > _step(placed, at):
            total += after - at
    return total


def _step(series: Sequence[tuple[float, int]], at: float) -> int:
    value = 0
    for t, v in series:
        if t > at:
            break
        value = v
    return value
