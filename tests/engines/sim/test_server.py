"""`denv sim serve` as a client sees it: the official openai client, /metrics parsed by
prometheus_client, faults, and latencies measured against the scheduler's modelled times.
Every simulator runs as its own process on a free loopback port."""

from __future__ import annotations

import asyncio
import http.client
import itertools
import json
import signal
import socket
import statistics
import time
from collections.abc import Iterator
from concurrent import futures
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import aiohttp
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from reconciler.engines.model.perf import PerfModel
from reconciler.engines.model.scheduler import Scheduler
from reconciler.engines.model.spec import SimSpec
from reconciler.engines.model.tokens import block_hashes
from reconciler.engines.sim.faults import CRASH_EXIT_CODE
from tests.engines.sim.sims import (
    Sim,
    http_get,
    http_post,
    pd_pair,
    sim_process,
    sim_spec,
    wait_until,
)

MODEL = "llama-3.1-8b"
SCALE = 10.0  # the shared simulator runs ten times faster than real time


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("sim-logs")


@pytest.fixture(scope="module")
def sim(logs: Path) -> Iterator[Sim]:
    with sim_process(sim_spec(time_scale=SCALE), logs) as running:
        wait_until(lambda: http_get(running.url + "/health")[0] == 200, 10, "warm-up")
        yield running


@pytest.fixture
def client(sim: Sim) -> openai.OpenAI:
    return openai.OpenAI(base_url=sim.url + "/v1", api_key="none", max_retries=0, timeout=20)


def metrics(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of /metrics by (name, sorted labels), parsed by prometheus_client."""
    status, body = http_get(url + "/metrics")
    assert status == 200
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(body.decode())
        for s in family.samples
    }


def sample(
    values: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str
) -> float:
    wanted = {"model_name": MODEL, "engine": "0", **labels}
    return values[(name, tuple(sorted(wanted.items())))]


# -- the API ------------------------------------------------------------------------------


def test_it_says_it_is_simulated_and_at_which_time_scale(sim: Sim, client: openai.OpenAI) -> None:
    assert [m.id for m in client.models.list().data] == [MODEL]
    info = json.loads(http_get(sim.url + "/server_info")[1])
    assert info["simulated"] is True and info["time_scale"] == SCALE
    assert json.loads(http_get(sim.url + "/model_info")[1])["model_path"] == MODEL
    done = client.completions.create(model=MODEL, prompt="Hi", max_tokens=2, temperature=0)
    assert done.system_fingerprint == "denv-sim-x10"
    assert "time scale x10" in sim.line


def test_completions_from_text_and_token_ids(client: openai.OpenAI) -> None:
    text = client.completions.create(
        model=MODEL,
        prompt="The capital of France is",
        max_tokens=12,
        temperature=0,
        extra_body={"ignore_eos": True},
    )
    choice = text.choices[0]
    assert choice.finish_reason == "length" and len(choice.text.split()) == 12
    assert text.usage is not None and text.usage.completion_tokens == 12
    ids = client.completions.create(
        model=MODEL,
        prompt=[101, 2023, 2003, 1037, 3231],
        max_tokens=5,
        temperature=0,
        extra_body={"ignore_eos": True},
    )
    assert ids.usage is not None and ids.usage.prompt_tokens == 5
    nested = client.completions.create(
        model=MODEL,
        prompt=[[101, 2023, 2003, 1037, 3231]],
        max_tokens=5,
        temperature=0,
        extra_body={"ignore_eos": True},
    )
    assert nested.choices[0].text == ids.choices[0].text


def test_greedy_answers_repeat_and_end_at_their_natural_length(client: openai.OpenAI) -> None:
    prompt = "Write a haiku about GPUs."
    answers = [
        client.completions.create(model=MODEL, prompt=prompt, max_tokens=1000, temperature=0)
        for _ in range(2)
    ]
    assert answers[0].choices[0].text == answers[1].choices[0].text
    assert answers[0].choices[0].finish_reason == "stop"
    assert answers[0].usage is not None and 0 < answers[0].usage.completion_tokens < 1000
    short = client.completions.create(model=MODEL, prompt=prompt, max_tokens=3, temperature=0)
    assert short.choices[0].finish_reason == "length"
    assert answers[0].choices[0].text.startswith(short.choices[0].text)


def test_seeded_sampling_repeats(client: openai.OpenAI) -> None:
    def ask(seed: int) -> str:
        return (
            client.completions.create(
                model=MODEL, prompt="Once upon a time", max_tokens=8, temperature=0.9, seed=seed
            )
            .choices[0]
            .text
        )

    assert ask(7) == ask(7)
    assert ask(7) != ask(8)


def test_streams_match_whole_answers_and_end_with_usage(client: openai.OpenAI) -> None:
    whole = client.completions.create(
        model=MODEL, prompt="Count to ten:", max_tokens=16, temperature=0
    )
    chunks = list(
        client.completions.create(
            model=MODEL,
            prompt="Count to ten:",
            max_tokens=16,
            temperature=0,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    assert "".join(c.choices[0].text for c in chunks if c.choices) == whole.choices[0].text
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == whole.usage.completion_tokens  # type: ignore[union-attr]
    assert chunks[-2].choices[0].finish_reason == whole.choices[0].finish_reason

    messages: list[Any] = [{"role": "user", "content": "Say hello."}]
    chat = client.chat.completions.create(
        model=MODEL, messages=messages, max_tokens=10, temperature=0
    )
    deltas = list(
        client.chat.completions.create(
            model=MODEL,
            messages=messages,
            max_tokens=10,
            temperature=0,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    assert deltas[0].choices[0].delta.role == "assistant"
    streamed = "".join(d.choices[0].delta.content or "" for d in deltas if d.choices)
    assert streamed == chat.choices[0].message.content
    assert (
        deltas[-1].usage is not None and deltas[-1].usage.prompt_tokens == chat.usage.prompt_tokens
    )  # type: ignore[union-attr]


def test_logprobs_are_consistent_with_the_chosen_tokens(client: openai.OpenAI) -> None:
    done = client.completions.create(
        model=MODEL, prompt="Logprobs, please", max_tokens=6, temperature=0, logprobs=3
    )
    lp = done.choices[0].logprobs
    assert lp is not None and lp.tokens and lp.top_logprobs and lp.token_logprobs
    assert "".join(lp.tokens) == done.choices[0].text
    for token, logprob, top in zip(lp.tokens, lp.token_logprobs, lp.top_logprobs, strict=True):
        ranked = list(top.items())
        assert len(ranked) == 3 and ranked[0] == (token, logprob)
        assert [v for _, v in ranked] == sorted(top.values(), reverse=True)

    chat = client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "Hi"}],
        max_tokens=5,
        temperature=0,
        logprobs=True,
        top_logprobs=2,
    )
    content = chat.choices[0].logprobs.content  # type: ignore[union-attr]
    assert (
        content is not None and "".join(c.token for c in content) == chat.choices[0].message.content
    )
    for item in content:
        assert next(t.token for t in item.top_logprobs) == item.token
        assert item.top_logprobs[0].logprob >= item.top_logprobs[1].logprob


def test_fp8_weights_change_a_share_of_greedy_answers(logs: Path) -> None:
    prompts = [f"Question {i}: what is {i} squared?" for i in range(30)]

    def answers(url: str) -> list[str]:
        def ask(prompt: str) -> str:
            status, body = http_post(url + "/v1/completions", {"prompt": prompt, "temperature": 0})
            assert status == 200
            return str(body["choices"][0]["text"])

        with ThreadPoolExecutor(8) as pool:
            return list(pool.map(ask, prompts))

    fast = 1000.0  # whole answers: only the tokens matter here, not the time they take
    with (
        sim_process(sim_spec(time_scale=fast), logs) as reference,
        sim_process(sim_spec(time_scale=fast, settings={"quantization": "fp8"}), logs) as fp8,
    ):
        differ = sum(a != b for a, b in zip(answers(reference.url), answers(fp8.url), strict=True))
    assert 1 <= differ <= 15  # PERTURBED_FRACTION["quantization"] is 20 %


@pytest.mark.parametrize(
    ("path", "body", "status", "kind"),
    [
        ("/v1/completions", {"model": "gpt-9", "prompt": "x"}, 404, "NotFoundError"),
        ("/v1/completions", {"prompt": [[1, 2], [3, 4]]}, 400, "BadRequestError"),
        ("/v1/completions", {"prompt": "x", "n": 2}, 400, "BadRequestError"),
        ("/v1/completions", {"prompt": [1, -5]}, 400, "BadRequestError"),
        ("/v1/completions", {"prompt": "x", "max_tokens": 10**7}, 400, "BadRequestError"),
        ("/v1/chat/completions", {"messages": []}, 400, "BadRequestError"),
        ("/v1/completions", {}, 400, "BadRequestError"),
    ],
    ids=[
        "unknown-model",
        "two-prompts",
        "n",
        "bad-token-id",
        "too-long",
        "no-messages",
        "no-prompt",
    ],
)
def test_bad_requests_get_openai_style_errors(
    sim: Sim, path: str, body: dict[str, Any], status: int, kind: str
) -> None:
    got, answer = http_post(sim.url + path, body)
    assert got == status
    assert answer["error"]["type"] == kind and answer["error"]["message"]


def test_metrics_parse_with_vllm_names_and_counters_move(sim: Sim, client: openai.OpenAI) -> None:
    before = metrics(sim.url)
    client.completions.create(
        model=MODEL,
        prompt=list(range(1, 1100)),
        max_tokens=7,
        temperature=0,
        extra_body={"ignore_eos": True},
    )
    after = metrics(sim.url)

    def moved(name: str, **labels: str) -> float:
        return sample(after, name, **labels) - sample(before, name, **labels)

    assert moved("vllm:generation_tokens_total") == 7
    assert moved("vllm:prompt_tokens_total") == 1099
    assert moved("vllm:prefix_cache_queries_total") == 1099
    assert 0 <= moved("vllm:prefix_cache_hits_total") <= 1024  # two full blocks at most
    assert moved("vllm:request_success_total", finished_reason="length") == 1
    assert moved("vllm:time_to_first_token_seconds_count") == 1
    assert moved("vllm:inter_token_latency_seconds_count") == 6
    assert moved("vllm:e2e_request_latency_seconds_count") == 1
    assert moved("vllm:request_time_per_output_token_seconds_count") == 1
    assert moved("vllm:request_queue_time_seconds_count") == 1
    assert 0 <= sample(after, "vllm:kv_cache_usage_perc") <= 1
    assert sample(after, "vllm:num_requests_running") >= 0
    assert sample(after, "vllm:num_requests_waiting") >= 0
    for name in (
        "num_preemptions",
        "spec_decode_num_draft_tokens",
        "spec_decode_num_accepted_tokens",
    ):
        assert sample(after, f"vllm:{name}_total") >= 0
    info = next(k for k in after if k[0] == "denv_sim_info")
    assert ("simulated", "true") in info[1] and ("time_scale", "10") in info[1]


def test_a_client_leaving_mid_stream_frees_its_slot_quietly(sim: Sim) -> None:
    before = metrics(sim.url)

    async def leave_after_two_chunks() -> None:
        body = {"prompt": "leave", "max_tokens": 500, "ignore_eos": True, "stream": True}
        async with (
            aiohttp.ClientSession() as session,
            session.post(sim.url + "/v1/completions", json=body) as r,
        ):
            chunks = 0
            async for line in r.content:
                chunks += line.startswith(b"data: {")
                if chunks == 2:
                    return

    asyncio.run(leave_after_two_chunks())

    def aborted() -> bool:
        now = metrics(sim.url)
        left = sample(now, "vllm:request_success_total", finished_reason="abort")
        gone = left - sample(before, "vllm:request_success_total", finished_reason="abort")
        return gone == 1 and sample(now, "vllm:num_requests_running") == 0

    wait_until(aborted, 10, "the abandoned request to be aborted")
    assert "Traceback" not in sim.log.read_text()


def test_a_client_that_stops_reading_gets_its_whole_stream_once_it_reads(logs: Path) -> None:
    """Past what the sockets buffer (Linux's default send buffer grows to 4 MiB), the fan-out
    leaves a slow client's chunks to its handler, which writes the backlog and waits for the
    client (aiohttp drains it): nothing is lost or reordered."""
    prompt, tokens = "read me late", 30_000  # about 6 MB of events
    body = {"prompt": prompt, "max_tokens": tokens, "temperature": 0, "ignore_eos": True}
    with sim_process(sim_spec(time_scale=100), logs) as fast:
        wait_until(lambda: http_get(fast.url + "/health")[0] == 200, 10, "warm-up")
        # a greedy answer's k-th token does not depend on max_tokens: its start stands for it
        status, start = http_post(fast.url + "/v1/completions", {**body, "max_tokens": 200})
        assert status == 200
        before = metrics(fast.url)
        data = json.dumps({**body, "stream": True}).encode()
        host, port = fast.url.removeprefix("http://").rsplit(":", 1)
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.connect((host, int(port)))
            head = f"POST /v1/completions HTTP/1.1\r\nHost: {host}\r\n"
            head += f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
            sock.sendall(head.encode() + data)

            def generated() -> bool:  # the engine is done while the client has read nothing
                now = metrics(fast.url)
                done = sample(now, "vllm:request_success_total", finished_reason="length")
                left = sample(before, "vllm:request_success_total", finished_reason="length")
                return done - left == 1

            wait_until(generated, 60, "the engine to finish the unread answer")
            response = http.client.HTTPResponse(sock)
            response.begin()
            events = response.read().decode().split("\n\n")
    texts = [json.loads(e[6:])["choices"][0]["text"] for e in events if e.startswith("data: {")]
    words = "".join(texts).split(" ")[1:]  # every token's text is a space and a word
    assert len(words) == tokens and " " + " ".join(words[:200]) == start["choices"][0]["text"]
    assert events[-2:] == ["data: [DONE]", ""]


# -- faults -------------------------------------------------------------------------------


def test_health_is_503_until_warm_up_ends(logs: Path) -> None:
    with sim_process(sim_spec(), logs, "--fault-warmup-s", "1.5") as slow:
        assert http_get(slow.url + "/health")[0] == 503
        assert http_post(slow.url + "/v1/completions", {"prompt": "x"})[0] == 503
        wait_until(lambda: http_get(slow.url + "/health")[0] == 200, 10, "warm-up to end")


def test_crash_after_n_answers_exits_non_zero(logs: Path) -> None:
    with sim_process(sim_spec(time_scale=SCALE), logs, "--fault-crash-after", "2") as doomed:
        for _ in range(2):
            assert (
                http_post(doomed.url + "/v1/completions", {"prompt": "x", "max_tokens": 2})[0]
                == 200
            )
        wait_until(lambda: doomed.proc.poll() is not None, 10, "the crash")
        assert doomed.proc.returncode == CRASH_EXIT_CODE
        assert http_get(doomed.url + "/health", 1)[0] == 0


@pytest.fixture(scope="module")
def faulty(logs: Path) -> Iterator[Sim]:
    """A simulator whose faults the tests set through /admin/faults (and clear after)."""
    with sim_process(sim_spec(time_scale=SCALE), logs) as running:
        yield running


def set_faults(sim: Sim, **faults: Any) -> dict[str, Any]:
    status, view = http_post(sim.url + "/admin/faults", faults)
    assert status == 200, view
    return view


def test_error_rate_answers_a_seeded_share_with_500(faulty: Sim) -> None:
    def statuses() -> list[int]:
        set_faults(faulty, error_rate=0.3, seed=11)
        return [
            http_post(faulty.url + "/v1/completions", {"prompt": "x", "max_tokens": 1})[0]
            for _ in range(40)
        ]

    try:
        first = statuses()
        assert set(first) == {200, 500} and 4 <= first.count(500) <= 20
        assert statuses() == first  # the same seed fails the same requests
        status, body = http_post(faulty.url + "/admin/faults", {"error_rate": 2})
        assert status == 400 and "error_rate" in body["error"]["message"]
    finally:
        set_faults(faulty, error_rate=0)
    assert http_post(faulty.url + "/v1/completions", {"prompt": "x", "max_tokens": 1})[0] == 200


async def _stream_gaps(url: str, body: dict[str, Any]) -> tuple[float, list[float]]:
    """TTFT and the gaps between token-carrying chunks of one streamed answer (seconds)."""
    async with aiohttp.ClientSession() as session:
        sent = time.perf_counter()
        arrivals = []
        async with session.post(url + "/v1/completions", json={**body, "stream": True}) as r:
            assert r.status == 200
            async for line in r.content:
                if line.startswith(b"data: {") and b'"text":""' not in line:
                    arrivals.append(time.perf_counter())
    gaps = [b - a for a, b in itertools.pairwise(arrivals)]
    return arrivals[0] - sent, gaps


@pytest.mark.serial  # compares wall-clock gaps with the model
def test_a_latency_spike_raises_inter_token_latency(faulty: Sim) -> None:
    body = {"prompt": "spike", "max_tokens": 20, "ignore_eos": True, "temperature": 0}
    _, calm = asyncio.run(_stream_gaps(faulty.url, body))
    try:
        view = set_faults(faulty, spike_ms=200, spike_s=30)
        assert view["spike_active"] is True
        _, spiked = asyncio.run(_stream_gaps(faulty.url, body))
    finally:
        set_faults(faulty, spike_ms=0, spike_s=None)
    # 200 modelled ms per step at time scale 10: 20 ms more per gap
    assert statistics.median(spiked) - statistics.median(calm) == pytest.approx(0.020, abs=0.004)


def test_a_hang_stops_answers_until_cleared(faulty: Sim) -> None:
    client = openai.OpenAI(base_url=faulty.url + "/v1", api_key="none", max_retries=0, timeout=0.5)
    try:
        set_faults(faulty, hang=True)
        assert http_get(faulty.url + "/health", timeout_s=0.5)[0] == 0
        with pytest.raises(openai.APITimeoutError):
            client.completions.create(model=MODEL, prompt="x", max_tokens=2)
    finally:
        set_faults(faulty, hang=False)
    assert http_get(faulty.url + "/health")[0] == 200
    assert client.completions.create(model=MODEL, prompt="x", max_tokens=2).choices


# -- latencies agree with the model -------------------------------------------------------


def _modelled(
    spec: SimSpec, arrivals: list[float], prompts: list[list[int]], out: int
) -> tuple[list[float], list[float]]:
    """TTFT of each request and every inter-token gap, in seconds, as the engine loop
    would produce them for these arrival times: replay them into a fresh Scheduler. A request
    joins the batch after the model's request overhead."""
    model = PerfModel.from_spec(spec)
    scheduler = Scheduler(model)
    joins = [a + model.request_overhead_s / spec.time_scale for a in arrivals]
    now, pending = 0.0, list(range(len(arrivals)))
    first: dict[str, float] = {}
    last: dict[str, float] = {}
    gaps: list[float] = []
    while pending or not scheduler.idle:
        while pending and joins[pending[0]] <= now:
            i = pending.pop(0)
            scheduler.add(str(i), len(prompts[i]), block_hashes(prompts[i]), out)
        if scheduler.idle:
            now = joins[pending[0]]
            continue
        step = scheduler.step()
        assert step is not None
        now += step.duration_s / spec.time_scale
        for rid in step.tokens:
            if rid in first:
                gaps.append(now - last[rid])
            else:
                first[rid] = now - arrivals[int(rid)]
            last[rid] = now
    return [first[str(i)] for i in range(len(arrivals))], gaps


@pytest.mark.serial  # compares wall-clock timings with the model
def test_measured_ttft_and_itl_match_the_model_at_moderate_load(logs: Path) -> None:
    spec = sim_spec("llama-3.1-70b/vllm@1", time_scale=1.0)
    streams, out = 12, 48
    prompts = [
        [(r * 1009 + i * 7) % 50000 + 1 for i in range(800 + 40 * r)] for r in range(streams)
    ]

    async def run(url: str) -> tuple[list[float], list[float], list[float]]:
        async with aiohttp.ClientSession() as session:
            start = time.perf_counter()
            sent: list[float] = [0.0] * streams
            ttft: list[float] = [0.0] * streams
            gaps: list[float] = []

            async def one(r: int) -> None:
                await asyncio.sleep(0.05 * r)  # a staggered, moderate arrival pattern
                body = {"prompt": prompts[r], "max_tokens": out, "ignore_eos": True, "stream": True}
                sent[r] = time.perf_counter() - start
                arrivals = []
                async with session.post(url + "/v1/completions", json=body) as resp:
                    async for line in resp.content:
                        if line.startswith(b"data: {") and b'"choices":[]' not in line:
                            arrivals.append(time.perf_counter() - start)
                ttft[r] = arrivals[0] - sent[r]
                gaps.extend(b - a for a, b in itertools.pairwise(arrivals))

            await asyncio.gather(*(one(r) for r in range(streams)))
            return sent, ttft, gaps

    with sim_process(spec, logs) as timed:
        sent, ttft, gaps = asyncio.run(run(timed.url))
    expected_ttft, expected_gaps = _modelled(spec, sent, prompts, out)
    assert statistics.median(ttft) == pytest.approx(statistics.median(expected_ttft), rel=0.10)
    assert statistics.mean(ttft) == pytest.approx(statistics.mean(expected_ttft), rel=0.10)
    assert statistics.median(gaps) == pytest.approx(statistics.median(expected_gaps), rel=0.10)
    assert statistics.mean(gaps) == pytest.approx(statistics.mean(expected_gaps), rel=0.10)


# -- P/D and the process ------------------------------------------------------------------


def test_a_decode_request_waits_for_its_rooms_prefill(logs: Path) -> None:
    with pd_pair(logs, SCALE) as (prefill, decode), ThreadPoolExecutor(1) as pool:
        body = {"prompt": "Split me. " * 200, "max_tokens": 8, "ignore_eos": True}
        body |= {"temperature": 0, "bootstrap_host": "127.0.0.1"}
        body |= {"bootstrap_port": prefill.bootstrap_port, "bootstrap_room": 2**63 + 17}
        decoding = pool.submit(http_post, decode.url + "/v1/completions", body)
        # admitted, then parked: 0.5 s is 5 modelled seconds, far more than 8 decode steps
        wait_until(
            lambda: http_get(decode.url + "/admin/faults")[1].count(b'"requests": 1'),
            5,
            "admission",
        )
        assert not futures.wait([decoding], timeout=0.5).done
        status, first = http_post(prefill.url + "/v1/completions", body)
        assert status == 200 and first["usage"]["completion_tokens"] == 1
        status, answer = decoding.result(timeout=10)
        assert status == 200 and answer["usage"]["completion_tokens"] == 8
        assert answer["choices"][0]["text"].startswith(first["choices"][0]["text"])


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "sigint"])
def test_the_server_exits_0_on_sigterm_and_sigint(logs: Path, signum: int) -> None:
    with sim_process(sim_spec(), logs) as running:
        running.proc.send_signal(signum)
        assert running.proc.wait(10) == 0
        assert "closed" in running.log.read_text()
