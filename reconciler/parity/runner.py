"""Adapter: a parity suite run against two OpenAI-compatible endpoints, the reference and the
candidate, over HTTP — bounded concurrency, retries on transient errors, one verdict.

denv's endpoint client (adapters/endpoint.py) rather than the openai client: the load
generator uses it too, parity reads the response bodies as vLLM and SGLang send them (chat and
completion logprob shapes differ), and retries follow one rule of denv's own (tenacity)
instead of the client's built-in one. A suite that cannot run to its end raises ParityError:
it never yields a verdict, so it can never pass.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from reconciler.adapters.endpoint import TRANSIENT, EndpointSession
from reconciler.errors import ParityError, UsageError
from reconciler.parity import wire
from reconciler.parity.compare import compare
from reconciler.parity.suite import Suite, SuitePrompt
from reconciler.parity.verdict import Outcome, Verdict, compile_verdict
from reconciler.spec.policy import ParityPolicy

# Statuses a busy or restarting server answers with: worth another try.
TRANSIENT_STATUS = frozenset({408, 429, 500, 502, 503, 504})
DEFAULT_CONCURRENCY = 16  # requests in flight per endpoint; the reference may be serving users

ProgressCallback = Callable[[int, int], None]  # (prompts compared, prompts in the suite)


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 5  # per request, the first one included
    first_wait_s: float = 0.5  # then doubling, up to max_wait_s
    max_wait_s: float = 8.0
    timeout_s: float = 600.0  # one whole answer: a long one from a loaded engine takes a while


class Transient(Exception):
    """A failure another try may not have: refused or dropped connections, timeouts, 5xx."""


def _brief(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "…"


class Endpoint:
    """One OpenAI-compatible server, named by its role in the run."""

    def __init__(self, role: str, url: str, retry: RetryPolicy, concurrency: int) -> None:
        self.role = role
        self.base = wire.endpoint_base(url)
        self.shown = wire.shown_url(self.base)
        self.session = EndpointSession(self.base, limit=concurrency, total=retry.timeout_s)
        self.retry = retry
        self.model = ""

    async def _once(self, path: str, body: dict[str, Any] | None) -> Any:
        method = "GET" if body is None else "POST"
        try:
            async with self.session.request(method, path, json_body=body) as response:
                text = await response.text()
        except TRANSIENT as exc:
            raise Transient(str(exc) or type(exc).__name__) from exc
        if response.status in TRANSIENT_STATUS:
            raise Transient(f"HTTP {response.status}: {_brief(text)}")
        if response.status != 200:
            raise ParityError(
                f"{self.role} {self.shown}{path} answered HTTP {response.status}: {_brief(text)}"
            )
        try:
            return json.loads(text)
        except ValueError as exc:
            raise ParityError(f"{self.role} {self.shown}{path} did not answer JSON") from exc

    async def call(self, path: str, body: dict[str, Any] | None, what: str) -> Any:
        """The JSON of a 200 answer, retrying transient failures; ParityError when they last."""
        retrying = AsyncRetrying(
            stop=stop_after_attempt(self.retry.attempts),
            wait=wait_exponential(multiplier=self.retry.first_wait_s, max=self.retry.max_wait_s),
            retry=retry_if_exception_type(Transient),
            reraise=True,
        )
        try:
            async for attempt in retrying:
                with attempt:
                    return await self._once(path, body)
        except Transient as exc:
            raise ParityError(
                f"the suite did not run completely: {self.role} {self.shown} failed {what} "
                f"after {self.retry.attempts} attempts: {exc}"
            ) from exc
        raise AssertionError("tenacity neither returned nor raised")  # pragma: no cover

    async def connect(self) -> None:
        """Learn the served model's name (`GET /v1/models`): requests must name it."""
        body = await self.call("/v1/models", None, "to list its models")
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, list) or not data or not isinstance(data[0], dict):
            raise ParityError(f"{self.role} {self.shown}/v1/models lists no model")
        self.model = str(data[0].get("id"))

    async def answer(self, prompt: SuitePrompt, top_k: int) -> wire.Answer:
        path, body = wire.request(prompt, self.model, max(prompt.top_logprobs, top_k))
        reply = await self.call(path, body, f"on prompt {prompt.id}")
        try:
            return wire.answer(prompt, reply)
        except wire.BadAnswer as exc:
            raise ParityError(
                f"{self.role} {self.shown} answered prompt {prompt.id} in a way parity cannot "
                f"compare: {exc}"
            ) from exc


async def _compare_all(
    reference: Endpoint,
    candidate: Endpoint,
    suite: Suite,
    policy: ParityPolicy,
    progress: ProgressCallback | None,
    concurrency: int,
) -> list[Outcome]:
    gate = asyncio.Semaphore(concurrency)
    total, done = len(suite.prompts), 0

    failed = asyncio.Event()

    async def one(prompt: SuitePrompt) -> Outcome:
        nonlocal done
        async with gate:
            if failed.is_set():  # the run is over: send nothing more
                raise asyncio.CancelledError
            try:
                ref, cand = await asyncio.gather(
                    reference.answer(prompt, policy.top_k), candidate.answer(prompt, policy.top_k)
                )
            except BaseException:
                failed.set()  # before the gate lets the next prompt in
                raise
        outcome = compare(prompt.id, ref, cand, policy.mode, policy.top_k)
        done += 1
        if progress is not None:
            progress(done, total)
        return outcome

    tasks = [asyncio.create_task(one(p)) for p in suite.prompts]
    try:
        finished, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
    finally:  # the first failure ends the run: nothing is left sending
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    for task in tasks:  # the failure itself, not the prompts it stopped
        if task in finished and not task.cancelled() and (error := task.exception()) is not None:
            raise error
    return [task.result() for task in tasks]


async def run_suite(
    reference_url: str,
    candidate_url: str,
    suite: Suite,
    policy: ParityPolicy,
    progress: ProgressCallback | None = None,
    *,
    concurrency: int = DEFAULT_CONCURRENCY,
    retry: RetryPolicy = RetryPolicy(),
    clock: Callable[[], float] = time.monotonic,
) -> Verdict:
    """Every prompt of `suite` to both endpoints (greedy, with top logprobs), compared by
    `policy`; ParityError when any prompt could not be answered by either side."""
    if concurrency < 1:
        raise UsageError(f"concurrency must be at least 1, got {concurrency}")
    started = clock()
    reference = Endpoint("reference", reference_url, retry, concurrency)
    candidate = Endpoint("candidate", candidate_url, retry, concurrency)
    async with reference.session, candidate.session:
        await reference.connect()
        await candidate.connect()
        outcomes = await _compare_all(reference, candidate, suite, policy, progress, concurrency)
    return compile_verdict(
        suite.name,
        policy.mode,
        policy.top_k,
        reference.shown,
        candidate.shown,
        outcomes,
        clock() - started,
    )


def run_parity(
    reference_url: str,
    candidate_url: str,
    suite: Suite,
    policy: ParityPolicy,
    progress: ProgressCallback | None = None,
    *,
    concurrency: int = DEFAULT_CONCURRENCY,
    retry: RetryPolicy = RetryPolicy(),
) -> Verdict:
    """`run_suite` for callers without an event loop (the CLI, the reconciler's deploy step
    once it has the URLs of both deployments)."""
    return asyncio.run(
        run_suite(
            reference_url,
            candidate_url,
            suite,
            policy,
            progress,
            concurrency=concurrency,
            retry=retry,
        )
    )
