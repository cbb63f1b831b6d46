"""Simulator engines as the alarm tests drive them: started and warm, sent short completions
by the official openai client, given faults through their admin API."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import openai

from reconciler.engines.model.spec import SimSpec
from tests.engines.sim.sims import (
    Sim,
    denv_router,
    http_get,
    http_post,
    router_args,
    router_process,
    sim_process,
    sim_spec,
    wait_until,
)

MODEL = "llama-3.1-8b"
GOOD = {"model": MODEL, "prompt": "hello", "max_tokens": 2}  # a completion every engine serves


@contextmanager
def warm_sims(logs: Path, count: int = 1, time_scale: float = 10.0) -> Iterator[tuple[Sim, ...]]:
    """`count` simulator engines, each answering /health; stopped at the end of the block."""
    spec = sim_spec(time_scale=time_scale)
    with ExitStack() as stack:
        sims = tuple(stack.enter_context(sim_process(spec, logs)) for _ in range(count))
        for sim in sims:
            wait_until(lambda s=sim: http_get(s.url + "/health")[0] == 200, 20, "warm-up")
        yield sims


def _each(sims: Sim | Sequence[Sim]) -> tuple[Sim, ...]:
    return (sims,) if isinstance(sims, Sim) else tuple(sims)


def traffic(sims: Sim | Sequence[Sim], each: int) -> list[int]:
    """`each` short completions to every engine, 12 at a time; the status of each (200 or the
    error's)."""

    def one(job: tuple[Sim, int]) -> int:
        sim, i = job
        client = openai.OpenAI(base_url=sim.url + "/v1", api_key="none", max_retries=0, timeout=60)
        try:
            client.completions.create(model=MODEL, prompt=f"hello {i}", max_tokens=2)
            return 200
        except openai.APIStatusError as exc:
            return exc.status_code

    with ThreadPoolExecutor(12) as pool:
        return list(pool.map(one, [(s, i) for s in _each(sims) for i in range(each)]))


def faults(sims: Sim | Sequence[Sim], **patch: Any) -> None:
    """The same faults (`denv sim serve`'s admin API) on every engine."""
    for sim in _each(sims):
        status, body = http_post(sim.url + "/admin/faults", patch)
        assert status == 200, body


@contextmanager
def routed(
    sims: Sequence[Sim],
    spec: SimSpec,
    logs: Path,
    ready: Callable[[str], bool],
    metrics_port: int | None = None,
) -> Iterator[str]:
    """The real sglang-router in front of `sims`, with the flags denv gives it (its router
    unit for them); its URL once `ready(url)` holds."""
    args = router_args(denv_router(list(sims), spec))
    with router_process(args, logs, ready, metrics_port) as url:
        yield url


def router_ready(url: str) -> bool:
    """The router at `url` says it is ready (its /readiness answers 200)."""
    return http_get(url + "/readiness", 2)[0] == 200


def completion(url: str) -> int:
    """The status of one short completion (GOOD) sent to `url`."""
    return http_post(url + "/v1/completions", GOOD)[0]
