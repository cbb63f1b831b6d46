"""Simulators behind the real sglang-router: two replicas round robin, and a prefill/decode
pair in P/D mode, driven by the official openai client."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.engines.sim.sims import (
    Sim,
    http_get,
    http_post,
    pd_pair,
    require_sglang_router,
    router_process,
    sim_process,
    sim_spec,
    wait_until,
)
from tests.labs.sims import routed

require_sglang_router()

SCALE = 10.0


def healthy_workers(count: int) -> object:
    def ready(url: str) -> bool:
        status, body = http_get(url + "/workers", 2)
        return status == 200 and json.loads(body).get("workers", []) and sum(
            w["is_healthy"] for w in json.loads(body)["workers"]
        ) == count  # fmt: skip

    return ready


def finished(sim: Sim) -> float:
    """Requests the simulator has finished, from its /metrics."""
    _, body = http_get(sim.url + "/metrics")
    return sum(
        s.value
        for family in text_string_to_metric_families(body.decode())
        for s in family.samples
        if s.name == "vllm:request_success_total"
    )


def client(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=url + "/v1", api_key="none", max_retries=0, timeout=30)


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("router-logs")


@pytest.fixture(scope="module")
def replicas(logs: Path) -> Iterator[tuple[Sim, Sim, str]]:
    spec = sim_spec(time_scale=SCALE)
    with sim_process(spec, logs) as a, sim_process(spec, logs) as b:
        args = ["--worker-urls", a.url, b.url, "--policy", "round_robin"]
        with router_process(args, logs, healthy_workers(2)) as url:  # type: ignore[arg-type]
            yield a, b, url


def test_replicas_of_one_weights_answer_alike_through_the_router(
    replicas: tuple[Sim, Sim, str],
) -> None:
    a, b, url = replicas
    routed = client(url)
    before = finished(a), finished(b)
    answers = [
        routed.completions.create(
            model="llama-3.1-8b", prompt="Why is the sky blue?", max_tokens=24, temperature=0
        )
        .choices[0]
        .text
        for _ in range(4)
    ]
    assert len(set(answers)) == 1 and answers[0]
    assert (finished(a) - before[0], finished(b) - before[1]) == (2, 2)  # round robin
    direct = client(a.url).completions.create(
        model="llama-3.1-8b", prompt="Why is the sky blue?", max_tokens=24, temperature=0
    )
    assert direct.choices[0].text == answers[0]


def test_the_openai_client_works_through_the_router(replicas: tuple[Sim, Sim, str]) -> None:
    # sglang-router 0.3.2 refuses token-id prompts on /v1/completions (422, it takes text or
    # a list of texts): token ids are tested against the simulator directly (test_server.py).
    _, _, url = replicas
    routed = client(url)
    prompt = "The capital of France is"
    whole = routed.completions.create(
        model="llama-3.1-8b",
        prompt=prompt,
        max_tokens=6,
        temperature=0,
        logprobs=2,
        extra_body={"ignore_eos": True},
    )
    assert whole.usage is not None and whole.usage.completion_tokens == 6
    assert whole.choices[0].logprobs is not None
    assert "".join(whole.choices[0].logprobs.tokens or []) == whole.choices[0].text

    streamed = routed.completions.create(
        model="llama-3.1-8b",
        prompt=prompt,
        max_tokens=6,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
        extra_body={"ignore_eos": True},
    )
    chunks = list(streamed)
    assert "".join(c.choices[0].text for c in chunks if c.choices) == whole.choices[0].text
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 6

    messages: list[dict[str, str]] = [{"role": "user", "content": "Hello there"}]
    chat = routed.chat.completions.create(
        model="llama-3.1-8b",
        messages=messages,
        max_tokens=8,
        temperature=0,  # type: ignore[arg-type]
    )
    deltas = list(
        routed.chat.completions.create(
            model="llama-3.1-8b",
            messages=messages,  # type: ignore[arg-type]
            max_tokens=8,
            temperature=0,
            stream=True,
        )
    )
    text = "".join(d.choices[0].delta.content or "" for d in deltas if d.choices)
    assert text == chat.choices[0].message.content and text


def test_a_prefill_decode_pair_answers_behind_the_router_in_pd_mode(logs: Path) -> None:
    with pd_pair(logs, SCALE) as (prefill, decode):
        assert prefill.bootstrap_port is not None
        args = ["--pd-disaggregation", "--prefill", prefill.url, str(prefill.bootstrap_port)]
        args += ["--decode", decode.url, "--policy", "round_robin"]
        with router_process(args, logs, healthy_workers(2)) as url:  # type: ignore[arg-type]
            routed = client(url)
            done = routed.completions.create(
                model="llama-3.1-70b",
                prompt="Disaggregate me, " * 300,
                max_tokens=16,
                temperature=0,
                extra_body={"ignore_eos": True},
            )
            assert done.usage is not None and done.usage.completion_tokens == 16
            chunks = list(
                routed.completions.create(
                    model="llama-3.1-70b",
                    prompt="Disaggregate me, " * 300,
                    max_tokens=16,
                    temperature=0,
                    stream=True,
                    extra_body={"ignore_eos": True},
                )
            )
            assert "".join(c.choices[0].text for c in chunks if c.choices) == done.choices[0].text
            wait_until(lambda: finished(prefill) == 2, 5, "the prefill worker's two answers")
            assert finished(decode) == 2
            # the prefill worker answered with one token each time; the decode worker with all
            _, prefill_metrics = http_get(prefill.url + "/metrics")
            assert 'vllm:generation_tokens_total{engine="0",model_name="llama-3.1-70b"} 2.0' in (
                prefill_metrics.decode()
            )


def test_a_burst_of_client_errors_does_not_fail_good_requests(logs: Path) -> None:
    """48 requests for a model nobody serves (404s, the client's fault) opened sglang-router's
    circuit breakers with its defaults: good clients then got 503s for a minute."""
    spec = sim_spec(time_scale=SCALE)
    with (
        sim_process(spec, logs) as a,
        sim_process(spec, logs) as b,
        routed([a, b], spec, logs, healthy_workers(2)) as url,  # type: ignore[arg-type]
    ):
        bad = {"model": "no-such-model", "prompt": "hi", "max_tokens": 2}
        refused = {http_post(url + "/v1/completions", bad)[0] for _ in range(48)}
        good = {"model": "llama-3.1-8b", "prompt": "hi", "max_tokens": 2}
        assert [http_post(url + "/v1/completions", good)[0] for _ in range(10)] == [200] * 10
        assert refused == {404}  # the client hears its own mistake, never a 503
