"""What a client measures against `denv sim serve` agrees with `denv sim predict` for the same
recipe, lengths and closed-loop concurrency (moderate load): within 10%."""

from __future__ import annotations

import asyncio
import itertools
import statistics
import time
from pathlib import Path

import aiohttp
import pytest

from reconciler.engines.model import traffic
from reconciler.engines.model.predict import default_warmup, predict
from tests.engines.model.perfspecs import hardware, model
from tests.engines.sim.sims import sim_process, sim_spec

pytestmark = pytest.mark.serial  # compares wall-clock timings with a model

CONCURRENCY, REQUESTS, ISL, OSL = 8, 32, 1000, 64


async def closed_loop(url: str) -> tuple[list[float], list[float]]:
    """CONCURRENCY clients, each sending its next request when the last one ends; per request
    (in send order) its TTFT and its inter-token gaps, in seconds."""
    order = itertools.count()
    measured: dict[int, tuple[float, list[float]]] = {}

    async def client(session: aiohttp.ClientSession) -> None:
        while (index := next(order)) < REQUESTS:
            # distinct token ids per request: no shared prefix, like predict's fixed lengths
            prompt = [(index * 7919 + i * 31) % 60000 + 1 for i in range(ISL)]
            body = {"prompt": prompt, "max_tokens": OSL, "ignore_eos": True, "stream": True}
            sent = time.perf_counter()
            arrivals: list[float] = []
            async with session.post(url + "/v1/completions", json=body) as answer:
                async for line in answer.content:
                    if line.startswith(b"data: {") and b'"choices":[]' not in line:
                        arrivals.append(time.perf_counter())
            gaps = [b - a for a, b in itertools.pairwise(arrivals)]
            measured[index] = (arrivals[0] - sent, gaps)

    async with aiohttp.ClientSession() as session:
        await asyncio.gather(*(client(session) for _ in range(CONCURRENCY)))
    warm = default_warmup(REQUESTS, CONCURRENCY)
    kept = [measured[i] for i in range(warm, REQUESTS)]
    return [t for t, _ in kept], [g for _, gaps in kept for g in gaps]


def test_client_measurements_agree_with_sim_predict(tmp_path: Path) -> None:
    spec = sim_spec("llama-3.1-8b/vllm@1", time_scale=1.0)
    expected = predict(
        spec.recipe,
        hardware("h200"),
        model("llama-3.1-8b"),
        traffic.fixed(ISL, OSL, REQUESTS),
        CONCURRENCY,
    )
    with sim_process(spec, tmp_path) as server:
        ttft, itl = asyncio.run(closed_loop(server.url))
    assert statistics.median(ttft) * 1000 == pytest.approx(expected.ttft_ms.p50, rel=0.10)
    assert statistics.median(itl) * 1000 == pytest.approx(expected.itl_ms.p50, rel=0.10)
