"""The load generator against denv's simulator (`denv sim serve`), directly and through the
real sglang-router: exact prompt and output lengths, the trace's prefix reuse seen by the
engine's prefix cache, and saturation flagged when the load outruns the engine."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from reconciler.bench.loadgen import Target, closed_loop, prompt_format
from reconciler.bench.prompts import simulator_chat_overhead
from reconciler.bench.sweep import run_sweep
from reconciler.bench.traffic import TraceLine
from reconciler.engines.model.predict import predict
from reconciler.engines.model.spec import SimSpec
from reconciler.engines.model.traffic import fixed
from tests.engines.sim.sims import Sim, http_get, router_process, sim_process, sim_spec

MODEL = "llama-3.1-8b"


def counter(sim: Sim, name: str) -> float:
    _, body = http_get(sim.url + "/metrics")
    return sum(
        s.value
        for family in text_string_to_metric_families(body.decode())
        for s in family.samples
        if s.name == name
    )


def shared_prefix_trace(count: int) -> list[TraceLine]:
    """Every prompt: one shared 512-token block (a system prompt), then its own 188 tokens."""
    return [
        TraceLine(
            timestamp=i * 20, input_length=700, output_length=16 + i % 5, hash_ids=[1, 100 + i]
        )
        for i in range(count)
    ]


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("bench-sim-logs")


@pytest.fixture(scope="module")
def sim(logs: Path) -> Iterator[Sim]:
    with sim_process(sim_spec(time_scale=10.0), logs) as server:
        yield server


def test_a_sweep_sends_exact_lengths_and_the_recorded_reuse(sim: Sim) -> None:
    trace = shared_prefix_trace(24)
    hits_before = counter(sim, "vllm:prefix_cache_hits_total")
    levels = run_sweep(sim.url, MODEL, trace, [1, 4], gpus=1, requests=24)
    assert [lv.load.concurrency for lv in levels] == [1, 4]
    for level in levels:
        m = level.metrics
        assert m.errors == 0 and level.sent == 24 and level.short_outputs == 0
        assert m.ttft_ms.p50 and m.tpot_ms.p50 and m.output_tok_s and m.output_tok_s > 0
    # the shared block was computed once: every later request found its 512 tokens cached
    hits = counter(sim, "vllm:prefix_cache_hits_total") - hits_before
    assert hits == 512 * (2 * 24 - 1)


def test_records_carry_the_engines_usage(sim: Sim) -> None:
    trace = shared_prefix_trace(6)
    records = asyncio.run(closed_loop(Target(url=sim.url, model=MODEL), trace, 2))
    assert [(r.prompt_tokens, r.output_tokens) for r in records] == [
        (line.input_length, line.output_length) for line in trace
    ]
    assert all(len(r.chunks_s) >= 1 for r in records)


def sustained_rps(spec: SimSpec, input_length: int, output_length: int) -> float:
    """Answers per second of real time the simulator's own model sustains for these requests:
    as many clients as it runs sequences at once, in virtual time, sped up by its time scale."""
    batch = spec.recipe.settings.max_batch
    requests = fixed(input_length, output_length, 20 * batch)
    model = predict(spec.recipe, spec.hardware, spec.model, requests, concurrency=batch, warmup=0)
    return model.output_tok_s / output_length * spec.time_scale


def test_an_overloaded_engine_is_flagged_saturated(logs: Path) -> None:
    """Open loop at a third of what the engine sustains, then at four times it, where what it
    sustains is what its model says. On a busy machine the simulator and the load generator
    run slower than in an idle one: that deepens the overload and still leaves the light load
    well below it, so the verdicts hold however loaded the machine is (`make test-stress`).
    At twice real time (not ten) a busy machine keeps up with the simulated timings, and the
    overload builds a queue that dwarfs the delays it adds."""
    spec = sim_spec(time_scale=2.0, settings={"max_batch": 2})
    capacity = sustained_rps(spec, 200, 32)  # about 11 answers/s

    def trace(count: int) -> list[TraceLine]:
        return [
            TraceLine(timestamp=i * 10, input_length=200, output_length=32, hash_ids=[10 + i])
            for i in range(count)
        ]

    with sim_process(spec, logs) as server:
        easy, hard = (
            run_sweep(server.url, MODEL, trace(count), [rate], mode="rate", gpus=1)[0]
            for count, rate in ((32, capacity / 3), (80, capacity * 4))
        )
    assert not easy.saturation.saturated, easy.saturation
    assert easy.metrics.errors == 0 and easy.load.rate == pytest.approx(capacity / 3)
    assert hard.saturation.saturated, hard.saturation
    # answers come at the engine's pace, far behind the arrivals
    answers, arrivals = hard.saturation.answer_rps, hard.saturation.arrival_rps
    assert answers is not None and arrivals is not None and answers < arrivals / 2


def test_through_sglang_router_prompts_go_as_text_and_stay_exact(logs: Path) -> None:
    if os.environ.get("CI") != "true":
        pytest.importorskip("sglang_router")

    def ready(url: str) -> bool:
        status, body = http_get(url + "/workers", 2)
        return status == 200 and any(w["is_healthy"] for w in json.loads(body).get("workers", []))

    with sim_process(sim_spec(time_scale=10.0), logs) as server:
        args = ["--worker-urls", server.url, "--policy", "round_robin"]
        with router_process(args, logs, ready) as url:
            assert asyncio.run(prompt_format(Target(url=url, model=MODEL))) == "text"
            assert asyncio.run(prompt_format(Target(url=server.url, model=MODEL))) == "token_ids"
            trace = shared_prefix_trace(8)
            for api, overhead in (("completions", 0), ("chat", simulator_chat_overhead())):
                target = Target(
                    url=url, model=MODEL, api=api, prompt="text", chat_overhead=overhead
                )
                records = asyncio.run(closed_loop(target, trace, 2))
                assert all(r.ok for r in records), [r.detail for r in records]
                assert [(r.prompt_tokens, r.output_tokens) for r in records] == [
                    (line.input_length, line.output_length) for line in trace
                ], api
            # the text form keeps shared blocks shared: the prefix cache hits them (for each
            # api, all but the first two requests, sent together before the block was ready)
            assert counter(server, "vllm:prefix_cache_hits_total") >= 512 * 2 * (8 - 2)
