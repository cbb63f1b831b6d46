"""Adapter: the simulator's engine loop — the pure, clockless `Scheduler` driven in wall-clock
time on one asyncio loop.

Each pass takes one scheduler step, sleeps its modelled duration (divided by the time scale)
against a monotonic deadline, so sleep overshoot is paid back by the next step instead of
accumulating, then hands the step's tokens to the requests' streams and records metrics.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable

from reconciler.engines.model.scheduler import Scheduler, Step
from reconciler.engines.sim.faults import FaultState
from reconciler.engines.sim.metrics import EngineMetrics

# How far behind its deadline the loop may run and still catch up by shortening steps;
# beyond this (a CPU that cannot hand out a step's tokens within the next step) the lost time
# is lost, rather than bunching tokens together.
MAX_CATCH_UP_S = 0.005
# asyncio's timers wake up to a millisecond late (epoll rounds its timeout up to whole ms): the
# loop sleeps until this long before a deadline, then blocks for the rest (clock_nanosleep).
FINE_SLEEP_S = 0.0012
TRACE_STEPS = 65536  # recent steps kept for `GET /admin/steps`


class StepTrace:
    """One finished step, for clients that compare what they measured with the model: when its
    tokens were due, when their hand-out began and ended (the engine clock), its modelled
    duration as run (scaled), and the requests whose first token it emitted."""

    __slots__ = ("delivered", "due", "duration", "first_token", "handed_out")

    def __init__(
        self, due: float, delivered: float, duration: float, first_token: tuple[str, ...]
    ) -> None:
        self.due = due
        self.delivered = delivered
        self.duration = duration
        self.first_token = first_token
        self.handed_out = delivered  # the fan-out's end, set once every stream has its chunk


class Stream:
    """What one request has been given so far; its handler waits on it."""

    __slots__ = (
        "arrived",
        "emitted",
        "event",
        "finish_reason",
        "finished",
        "first_at",
        "id",
        "last_at",
        "max_tokens",
        "sink",
    )

    def __init__(self, request_id: str, arrived: float, max_tokens: int, reason: str) -> None:
        self.id = request_id
        self.arrived = arrived
        self.max_tokens = max_tokens
        self.finish_reason = reason  # what the answer ends with once all its tokens are out
        self.emitted = 0
        self.finished = False
        self.first_at: float | None = None
        self.last_at = arrived
        self.event = asyncio.Event()
        # Called in the step's fan-out, in step order, to write the new tokens at once (no
        # task switch per token); False, or none set: the handler is woken to do it.
        self.sink: Callable[[], bool] | None = None

    async def wait(self) -> None:
        """Until tokens arrive or the answer ends."""
        await self.event.wait()
        self.event.clear()

    def notify(self) -> None:
        sink = self.sink
        if sink is None or not sink():
            self.event.set()


class Engine:
    def __init__(
        self,
        scheduler: Scheduler,
        *,
        time_scale: float,
        faults: FaultState,
        metrics: EngineMetrics,
        clock: Callable[[], float],
        block: Callable[[float], None] = time.sleep,
        draft_tokens: int = 0,
    ) -> None:
        self._scheduler = scheduler
        self._scale = time_scale
        self._faults = faults
        self._metrics = metrics
        self._clock = clock
        self._block = block
        self._draft_tokens = draft_tokens  # speculative tokens proposed per decode step
        self._streams: dict[str, Stream] = {}
        self._wake = asyncio.Event()
        self._deadline = 0.0
        self.trace: deque[StepTrace] = deque(maxlen=TRACE_STEPS)

    def submit(
        self,
        request_id: str,
        arrived: float,
        prompt_tokens: int,
        hashes: list[int],
        max_tokens: int,
        reason: str,
        ignore_eos: bool = False,
    ) -> Stream:
        """Schedule a request that reached the server at `arrived` (its latencies count from
        then); RequestTooLarge if it can never fit."""
        stream = Stream(request_id, arrived, max_tokens, reason)
        self._scheduler.add(request_id, prompt_tokens, hashes, max_tokens, ignore_eos)
        self._streams[request_id] = stream
        self._wake.set()
        return stream

    def cancel(self, stream: Stream) -> None:
        """The client went away: free its slot; it counts as aborted."""
        if self._streams.pop(stream.id, None) is not None:
            self._scheduler.cancel(stream.id)
            self._metrics.success["abort"].inc()
            self._gauges()
            self._wake.set()

    def load(self) -> dict[str, int]:
        """What SGLang's `/get_load` reports for one data-parallel rank."""
        scheduler = self._scheduler
        used = round(scheduler.kv_usage * scheduler.model.kv_capacity_tokens)
        return {
            "dp_rank": 0,
            "num_reqs": scheduler.running + scheduler.waiting,
            "num_waiting_reqs": scheduler.waiting,
            "num_tokens": used,
        }

    def poke(self) -> None:
        """Look again at the faults (a hang cleared) and the queue."""
        self._wake.set()

    async def run(self) -> None:
        while True:
            if self._faults.faults.hang or self._scheduler.idle:
                self._wake.clear()
                await self._wake.wait()
                self._deadline = self._clock()
                continue
            start = self._clock()
            step = self._scheduler.step()
            if step is None:  # waiting requests that cannot start yet: wait for a change
                self._wake.clear()
                await self._wake.wait()
                continue
            duration = (step.duration_s + self._faults.extra_step_s(start)) / self._scale
            # The step runs from the last one's deadline, while that step's tokens fan out
            # (as a GPU computes the next step while the CPU streams): the fan-out is late
            # only where it overruns this step too.
            self._deadline = max(self._deadline + duration, start - MAX_CATCH_UP_S)
            await asyncio.sleep(max(0.0, self._deadline - self._clock() - FINE_SLEEP_S))
            rest = self._deadline - self._clock()
            if rest > 0:
                self._block(rest)
            now = self._clock()
            trace = StepTrace(self._deadline, now, duration, step.first_token)
            self.trace.append(trace)
            self._deliver(step, now, duration)
            trace.handed_out = self._clock()

    def _deliver(self, step: Step, now: float, duration: float) -> None:
        m = self._metrics
        streams = self._streams
        ending = set(step.finished)
        generated = decoded = accepted = 0
        gaps: dict[float, int] = {}  # streams by when their last token left: one ITL each
        for request_id, count in step.tokens.items():
            stream = streams.get(request_id)
            if stream is None or count <= 0:
                continue
            if stream.first_at is None:
                stream.first_at = now
                m.ttft.observe(now - stream.arrived)
                m.queue.observe(max(0.0, now - duration - stream.arrived))
            else:
                last = stream.last_at
                gaps[last] = gaps.get(last, 0) + 1
                decoded += 1
                accepted += count - 1  # what speculative decoding accepted: all but one token
            stream.last_at = now
            stream.emitted = min(stream.max_tokens, stream.emitted + count)
            generated += count
            if request_id in ending:  # its last chunk leaves in step order too
                del streams[request_id]
                self._finish(stream, now)
            else:
                stream.notify()
        for request_id in step.finished:
            finished = streams.pop(request_id, None)
            if finished is not None:
                self._finish(finished, now)
        for last, streams_at in gaps.items():
            m.itl.observe(now - last, streams_at)
        if self._draft_tokens and decoded:
            m.draft_tokens.inc(self._draft_tokens * decoded)
            m.accepted_tokens.inc(accepted)
        m.generation_tokens.inc(generated)
        # step.prompt_tokens excludes prefix-cache hits; vLLM counts whole prompts
        m.prompt_tokens.inc(step.prompt_tokens + step.cached_tokens)
        m.prefix_queries.inc(step.prompt_tokens + step.cached_tokens)
        m.prefix_hits.inc(step.cached_tokens)
        m.preemptions.inc(len(step.preempted))
        self._gauges()

    def _gauges(self) -> None:
        scheduler, m = self._scheduler, self._metrics
        m.running.set(scheduler.running)
        m.waiting.set(scheduler.waiting)
        m.kv_usage.set(scheduler.kv_usage)

    def _finish(self, stream: Stream, now: float) -> None:
        m = self._metrics
        stream.emitted = stream.max_tokens
        stream.finished = True
        stream.notify()
        e2e = now - stream.arrived
        m.e2e.observe(e2e)
        if stream.first_at is not None and stream.emitted > 1:
            m.tpot.observe((now - stream.first_at) / (stream.emitted - 1))
        m.success[stream.finish_reason].inc()
