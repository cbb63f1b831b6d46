"""`denv traffic record` as its users run it: a process in front of the simulator (and of a
scripted upstream of the test's own), the official openai client through it, streams and
whole answers, completions and chat. It passes everything through unchanged, writes lengths,
times and block ids only, and never writes or logs prompt or answer text."""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import openai
import pytest
from aiohttp import web

from reconciler.bench.traffic import BLOCK_TOKENS, read_trace
from tests.engines.sim.sims import ROOT, Sim, http_get, sim_process, sim_spec, wait_until

MODEL = "llama-3.1-8b"
CANARY = "qzv-CANARY-88213"


@dataclass
class Recording:
    url: str
    out: Path
    proc: subprocess.Popen[bytes]
    logs: list[Path]

    def stop(self) -> None:
        """Ctrl-C, as a user stops it: exit 0 with the file written."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        assert self.proc.wait(20) == 0, self.logs[1].read_text()

    def log_text(self) -> str:
        return "".join(path.read_text() for path in self.logs)


@contextlib.contextmanager
def recording(upstream: str, folder: Path, *flags: str) -> Iterator[Recording]:
    out, stdout, stderr = folder / "shape.jsonl", folder / "record.out", folder / "record.err"
    argv = [sys.executable, "-m", "reconciler", "traffic", "record", "--listen", "127.0.0.1:0"]
    argv += ["--upstream", upstream, "--out", str(out), *flags]
    with stdout.open("wb") as o, stderr.open("wb") as e:
        proc = subprocess.Popen(argv, stdout=o, stderr=e, cwd=ROOT)
    try:

        def listening() -> str | None:
            found = re.search(r"recording at (http://\S+)", stderr.read_text())
            if found is None and proc.poll() is not None:
                pytest.fail(f"the recorder exited {proc.returncode}: {stderr.read_text()}")
            return found.group(1) if found else None

        url = wait_until(listening, 30, "the recorder to listen")
        yield Recording(url, out, proc, [stdout, stderr])
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def files_holding(needle: str, *folders: Path) -> list[Path]:
    return [
        path
        for folder in folders
        for path in folder.rglob("*")
        if path.is_file() and needle.encode() in path.read_bytes()
    ]


@pytest.fixture(scope="module")
def sim_logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("sim-logs")


@pytest.fixture(scope="module")
def sim(sim_logs: Path) -> Iterator[Sim]:
    with sim_process(sim_spec(time_scale=50.0), sim_logs) as running:
        wait_until(lambda: http_get(running.url + "/health")[0] == 200, 10, "warm-up")
        yield running


def client(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=url + "/v1", api_key="none", max_retries=0, timeout=30)


# -- against the simulator ----------------------------------------------------------------


def test_the_openai_client_through_the_recorder_sees_the_engine_and_no_text_is_kept(
    sim: Sim, sim_logs: Path, tmp_path: Path
) -> None:
    context = " ".join(f"{CANARY} clause {i} of the shared context." for i in range(300))
    question = f"{context} Now answer {CANARY}?"
    chat = [{"role": "system", "content": context}, {"role": "user", "content": question}]
    direct = client(sim.url)
    with recording(sim.url, tmp_path) as rec:
        proxied = client(rec.url)
        ask = {"model": MODEL, "max_tokens": 12, "temperature": 0}
        whole = proxied.completions.create(prompt=context, **ask)
        assert (
            whole.choices[0].text
            == direct.completions.create(prompt=context, **ask).choices[0].text
        )
        chunks = list(proxied.completions.create(prompt=question, stream=True, **ask))
        assert all(chunk.usage is None for chunk in chunks)  # the usage it asked for is not shown
        assert chunks[-1].choices[0].finish_reason == "length"
        streamed = "".join(chunk.choices[0].text for chunk in chunks)
        assert streamed == direct.completions.create(prompt=question, **ask).choices[0].text
        chat_chunks = list(
            proxied.chat.completions.create(
                messages=chat, stream=True, stream_options={"include_usage": True}, **ask
            )
        )
        usage = chat_chunks[-1].usage  # the client asked: it gets its usage chunk
        assert usage is not None and chat_chunks[-1].choices == []
        answer = proxied.chat.completions.create(messages=chat, **ask)
        assert answer.usage is not None and answer.usage.prompt_tokens == usage.prompt_tokens
        ids = proxied.completions.create(prompt=list(range(1, 1301)), **ask)
        assert [m.id for m in proxied.models.list().data] == [MODEL]
        rec.stop()

    lines = read_trace(rec.out)
    assert [x.output_length for x in lines] == [12] * 5
    assert whole.usage is not None and ids.usage is not None
    assert lines[0].input_length == whole.usage.prompt_tokens
    assert lines[2].input_length == lines[3].input_length == usage.prompt_tokens
    assert lines[4].input_length == 1300
    for x in lines:
        assert len(x.hash_ids) == math.ceil(x.input_length / BLOCK_TOKENS)
    shared = lines[0].input_length // BLOCK_TOKENS
    assert lines[1].hash_ids[:shared] == lines[0].hash_ids[:shared]  # the context, reused
    assert lines[2].hash_ids == lines[3].hash_ids  # one chat, streamed and whole
    assert not set(lines[4].hash_ids) & set(lines[0].hash_ids + lines[2].hash_ids)
    assert lines[0].hash_ids[0] == 0 and max(max(x.hash_ids) for x in lines) < 100
    assert "recorded 5 requests" in rec.log_text() and "1 other requests" in rec.log_text()

    assert files_holding(CANARY, tmp_path, sim_logs) == []
    assert CANARY not in rec.log_text()


def test_errors_pass_through_unrecorded(sim: Sim, tmp_path: Path) -> None:
    with recording(sim.url, tmp_path, "--json") as rec:
        with pytest.raises(openai.NotFoundError) as refused:
            client(rec.url).completions.create(model="nope", prompt="hi", max_tokens=2)
        assert "does not exist" in str(refused.value)
        rec.stop()
    assert rec.out.read_text() == ""
    summary = json.loads(rec.logs[0].read_text())
    assert summary["recorded"] == 0
    assert summary["unrecorded"] == {"upstream answered 404": 1}


@pytest.mark.parametrize(
    ("listen", "upstream", "message"),
    [
        ("8080", "http://127.0.0.1:1", "--listen '8080': expected HOST:PORT"),
        ("127.0.0.1:0", "10.0.0.1:8000", "expected an http:// or https:// URL"),
    ],
)
def test_bad_arguments_exit_1_with_the_reason(
    tmp_path: Path, listen: str, upstream: str, message: str
) -> None:
    argv = [sys.executable, "-m", "reconciler", "traffic", "record", "--listen", listen]
    argv += ["--upstream", upstream, "--out", str(tmp_path / "s.jsonl")]
    done = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert done.returncode == 1 and message in done.stderr
    assert "Traceback" not in done.stderr


def test_an_unreachable_upstream_is_a_502(tmp_path: Path) -> None:
    with socket_closed_port() as port, recording(f"http://127.0.0.1:{port}", tmp_path) as rec:
        status, body = http_get(rec.url + "/v1/models")
        assert status == 502 and b"upstream unreachable" in body
        rec.stop()


@contextlib.contextmanager
def socket_closed_port() -> Iterator[int]:
    """A loopback port nothing listens on (bound, never listening, so no one takes it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield s.getsockname()[1]


# -- against a scripted upstream: bytes and timing ------------------------------------------

EVENTS = [
    b'data: {"id":"c1","choices":[{"index":0,"text":" al","finish_reason":null}]}\n\n',
    b'data: {"id":"c1","choices":[{"index":0,"text":" be","finish_reason":null}]}\n\n',
    b'data: {"id":"c1","choices":[{"index":0,"text":" ga","finish_reason":"length"}]}\n\n',
]
USAGE = b'data: {"id":"c1","choices":[],"usage":{"prompt_tokens":1300,"completion_tokens":3}}\n\n'
DONE = b"data: [DONE]\n\n"


@dataclass
class Scripted:
    """An upstream that streams EVENTS cut mid-event, holding the rest back until the test
    releases it, and has no /tokenize."""

    requests: list[tuple[dict[str, str], bytes]] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)
    held_until_released: bool = False
    cut_off: bool = False  # the proxy closed the upstream request before the answer ended
    request: web.Request | None = None

    def connection_closed(self) -> bool:
        """The proxy has closed its connection to this upstream (read from the test's thread)."""
        request = self.request
        return request is not None and (request.transport is None or request.transport.is_closing())

    async def completions(self, request: web.Request) -> web.StreamResponse:
        self.request = request
        body = await request.read()
        self.requests.append((dict(request.headers), body))
        asked = json.loads(body)
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "X-Upstream": "scripted"}
        )
        await response.prepare(request)
        await response.write(EVENTS[0][:20])
        await response.write(EVENTS[0][20:] + EVENTS[1][:7])
        loop = asyncio.get_running_loop()
        self.held_until_released = await loop.run_in_executor(None, self.release.wait, 20)
        try:
            await response.write(EVENTS[1][7:] + EVENTS[2])
            if (asked.get("stream_options") or {}).get("include_usage"):
                await response.write(USAGE)
            await response.write(DONE)
            await response.write_eof()
        except ConnectionResetError:
            self.cut_off = True
        return response


@contextlib.contextmanager
def scripted_upstream(script: Scripted) -> Iterator[str]:
    loop = asyncio.new_event_loop()
    app = web.Application()
    app.router.add_post("/v1/completions", script.completions)
    runner = web.AppRunner(app, access_log=None)
    loop.run_until_complete(runner.setup())
    site = web.TCPSite(runner, "127.0.0.1", 0)
    loop.run_until_complete(site.start())
    port = runner.addresses[0][1]
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        script.release.set()
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


async def stream_through(url: str, body: bytes, release: threading.Event) -> tuple[bytes, str]:
    """The raw bytes a client gets; releases the upstream once the first event is in."""
    headers = {"Content-Type": "application/json", "Authorization": "Bearer sk-test"}
    async with (
        aiohttp.ClientSession() as session,
        session.post(url + "/v1/completions", data=body, headers=headers) as answer,
    ):
        received = b""
        async for data in answer.content.iter_any():
            received += data
            if received.startswith(EVENTS[0]):
                release.set()
        return received, answer.headers.get("X-Upstream", "")


@pytest.mark.parametrize("client_asks_usage", [False, True], ids=["recorder-asks", "client-asks"])
def test_streams_pass_through_byte_for_byte_as_they_arrive(
    tmp_path: Path, client_asks_usage: bool
) -> None:
    options = {"include_usage": True} if client_asks_usage else {"continuous_usage_stats": False}
    body = json.dumps({"prompt": f"{CANARY} " * 3, "stream": True, "stream_options": options})
    script = Scripted()
    with scripted_upstream(script) as upstream, recording(upstream, tmp_path) as rec:
        received, marker = asyncio.run(stream_through(rec.url, body.encode(), script.release))
        rec.stop()
    expected = b"".join(EVENTS) + (USAGE if client_asks_usage else b"") + DONE
    assert received == expected
    assert script.held_until_released  # the first event reached the client before the rest
    assert marker == "scripted"
    headers, sent = script.requests[0]
    assert headers["Authorization"] == "Bearer sk-test"
    if client_asks_usage:
        assert sent == body.encode()
    else:
        asked = json.loads(sent)
        assert asked["stream_options"] == {"continuous_usage_stats": False, "include_usage": True}
        assert asked["prompt"] == json.loads(body)["prompt"]
    (line,) = read_trace(rec.out)
    assert (line.input_length, line.output_length, len(line.hash_ids)) == (1300, 3, 3)
    assert "/tokenize answered 404" in rec.log_text()
    assert files_holding(CANARY, tmp_path) == [] and CANARY not in rec.log_text()


async def leave_after_first_event(url: str) -> None:
    body = json.dumps({"prompt": [1, 2, 3], "stream": True}).encode()
    async with aiohttp.ClientSession() as session:
        answer = await session.post(url + "/v1/completions", data=body)
        await answer.content.readuntil(b"\n\n")
        answer.close()  # drop the connection mid-answer


def test_a_client_leaving_mid_stream_ends_the_upstream_request_unrecorded(tmp_path: Path) -> None:
    script = Scripted()
    with scripted_upstream(script) as upstream, recording(upstream, tmp_path) as rec:
        asyncio.run(leave_after_first_event(rec.url))
        # the proxy notices the client left and closes the upstream request before the
        # upstream has anything more to send (not only when its next chunk fails to pass)
        wait_until(script.connection_closed, 30, "the proxy to close the upstream request")
        script.release.set()
        wait_until(lambda: script.cut_off, 30, "the upstream's next write to fail")
        rec.stop()
    assert rec.out.read_text() == ""
    assert "not recorded: 1 × client left" in rec.log_text()
