"""Adapter: a sweep — the load generator at several loads against one endpoint, one level
after another, and each level's figures (metrics.py).

Modes: `concurrency` (closed loop; levels are client counts), `rate` (open loop; the trace's
arrivals rescaled to each mean rate in requests/s) and `replay` (open loop; levels are time
scales of the trace's own timestamps: 1 as recorded, 0.5 twice as fast). Progress is a
callback; nothing here prints.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import Literal

from reconciler.adapters.endpoint import UNREACHABLE
from reconciler.bench.levels import (
    Mode,
    level_label,
    level_lines,
    mean_rate,
    rate_scale,
    send_times,
)
from reconciler.bench.loadgen import Api, Clock, Target, closed_loop, open_loop, prompt_format
from reconciler.bench.metrics import LevelMetrics, level_metrics
from reconciler.bench.prompts import PromptFormat
from reconciler.bench.records import RequestRecord
from reconciler.bench.traffic import TraceLine
from reconciler.catalog.latency import LatencyTarget
from reconciler.errors import DenvError, UsageError
from reconciler.spec.result import Load

# (level label, requests answered or failed so far, requests in the level)
Progress = Callable[[str, int, int], None]


async def run_level(
    target: Target,
    lines: Sequence[TraceLine],
    mode: Mode,
    level: float,
    *,
    on_record: Callable[[RequestRecord], None],
    clock: Clock = time.perf_counter,
) -> tuple[Load, list[RequestRecord]]:
    if mode == "concurrency":
        records = await closed_loop(target, lines, int(level), on_record=on_record, clock=clock)
        return Load(concurrency=int(level)), records
    scale = rate_scale(lines, level) if mode == "rate" else level
    at = send_times(lines, time_scale=scale)
    offered = mean_rate(at)
    records = await open_loop(target, lines, at, on_record=on_record, clock=clock)
    return Load(rate=round(offered, 6) if offered else None), records


async def sweep(
    target: Target,
    traffic: Sequence[TraceLine],
    levels: Sequence[float],
    mode: Mode = "concurrency",
    *,
    gpus: int,
    latency: LatencyTarget | None = None,
    requests: int | None = None,
    progress: Progress = lambda *_: None,
    clock: Clock = time.perf_counter,
) -> list[LevelMetrics]:
    """Each level in turn, its figures computed as soon as it ends."""
    if not traffic:
        raise UsageError("no requests to send")
    if not levels or any(level <= 0 for level in levels):
        raise UsageError(f"levels must be positive numbers, got {list(levels)}")
    out: list[LevelMetrics] = []
    for level in levels:
        lines = level_lines(traffic, mode, level, requests)
        label = level_label(mode, level)
        finished = 0
        progress(label, 0, len(lines))

        def counted(_: RequestRecord, label: str = label, total: int = len(lines)) -> None:
            nonlocal finished
            finished += 1
            progress(label, finished, total)

        load, records = await run_level(target, lines, mode, level, on_record=counted, clock=clock)
        out.append(level_metrics(records, load, gpus=gpus, target=latency))
    return out


def run_sweep(
    endpoint_url: str,
    model: str,
    traffic: Sequence[TraceLine],
    levels: Sequence[float],
    mode: Mode = "concurrency",
    *,
    gpus: int,
    api: Api = "completions",
    prompt: PromptFormat | Literal["auto"] = "auto",
    chat_overhead: int = 0,
    latency: LatencyTarget | None = None,
    requests: int | None = None,
    timeout_s: float = 600.0,
    progress: Progress = lambda *_: None,
) -> list[LevelMetrics]:
    """The sweep `denv bench run` runs once its deployment is ready. `traffic` is a trace
    (`traffic.read_trace`) or a workload's lines (`traffic.generate`); `prompt` 'auto' sends
    token ids where the endpoint takes them and text where it does not (chat: always text)."""

    async def main() -> list[LevelMetrics]:
        form: PromptFormat = "text" if api == "chat" else "token_ids"
        if prompt != "auto":
            form = prompt
        elif api == "completions":
            probe = Target(url=endpoint_url, model=model, timeout_s=timeout_s)
            form = await prompt_format(probe)
        target = Target(
            url=endpoint_url,
            model=model,
            api=api,
            prompt=form,
            chat_overhead=chat_overhead,
            timeout_s=timeout_s,
        )
        return await sweep(
            target,
            traffic,
            levels,
            mode,
            gpus=gpus,
            latency=latency,
            requests=requests,
            progress=progress,
        )

    try:
        return asyncio.run(main())
    except UNREACHABLE as exc:
        why = str(exc) or type(exc).__name__
        raise DenvError(f"{endpoint_url}: cannot reach the endpoint: {why}") from exc
