"""Pure logic: `denv sim predict` — a recipe's benchmark figures without GPUs, by running the
simulator's Scheduler in virtual time under a load (closed-loop clients or open-loop arrivals).

An aggregated recipe's replicas are one pooled scheduler (PerfModel.pooled); a disaggregated
recipe is a prefill pool and a decode pool, the KV hand-off delay between them. Clients see
tokens from the aggregated or decode pool only. The first `warmup` requests (in send order)
are left out of every figure; throughput counts the tokens emitted between the first measured
send and the last measured finish.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass

from reconciler.catalog.latency import LatencyTarget
from reconciler.engines.model.calibration import Tuning
from reconciler.engines.model.perf import PerfModel
from reconciler.engines.model.scheduler import RequestTooLarge, Scheduler, Span
from reconciler.engines.model.spec import SimSpec
from reconciler.engines.model.stats import Prediction, pcts_ms, pcts_ms_weighted
from reconciler.engines.model.traffic import Request
from reconciler.errors import DenvError
from reconciler.spec.catalog import Hardware, ModelArch
from reconciler.spec.recipe import DisaggregatedTopology, Recipe, Role, total_gpus

MAX_REQUESTS = 5000


class PredictionError(DenvError):
    """Nothing could be predicted for this load."""


def default_requests(concurrency: int | None, rate: float | None) -> int:
    """Closed loop: a warm-up of one request per client, then 10 per client (InferenceX's
    num_prompts = 10 × concurrency); open loop: a minute of arrivals. At least 50, at most
    MAX_REQUESTS."""
    wanted = 11 * concurrency if concurrency is not None else round(60 * (rate or 1.0))
    return min(max(wanted, 50), MAX_REQUESTS)


def default_warmup(requests: int, concurrency: int | None) -> int:
    if concurrency is not None:
        return min(concurrency, requests // 2)
    return requests // 10


def sim_spec(
    recipe: Recipe, hardware: Hardware, model: ModelArch, role: Role = "aggregated"
) -> SimSpec:
    """The SimSpec of one replica of a recipe role."""
    topology = recipe.topology
    if isinstance(topology, DisaggregatedTopology):
        gpus = topology.decode.gpus if role == "decode" else topology.prefill.gpus
    else:
        gpus = topology.gpus
    return SimSpec(
        served_model=model.id,
        weights=model.hf_repo or model.id,
        model=model,
        hardware=hardware,
        recipe=recipe,
        role=role,
        gpus=gpus,
    )


def predict(
    recipe: Recipe,
    hardware: Hardware,
    model: ModelArch,
    requests: Sequence[Request],
    concurrency: int | None = None,
    warmup: int | None = None,
    rate: float | None = None,
    tuning: Tuning | None = None,
    target: LatencyTarget | None = None,
) -> Prediction:
    """Run `requests` through the recipe's pools in virtual time. With `concurrency`, that many
    clients each send their next request when the last one finishes; without, each request is
    sent at its `at_s`. `target`: what a request must meet to count in goodput (each request
    judged on its own TTFT, TPOT and E2E; an ITL objective on its TPOT, its mean gap)."""
    if not requests:
        raise ValueError("a prediction needs requests")
    if concurrency is None and any(r.at_s is None for r in requests):
        raise ValueError("open-loop requests need send times")
    topology = recipe.topology
    if isinstance(topology, DisaggregatedTopology):
        prefill = PerfModel.from_spec(sim_spec(recipe, hardware, model, "prefill"), tuning)
        decode = PerfModel.from_spec(sim_spec(recipe, hardware, model, "decode"), tuning)
        pools = [
            _Pool(Scheduler(prefill.pooled(topology.prefill.replicas)), visible=False),
            _Pool(Scheduler(decode.pooled(topology.decode.replicas)), visible=True),
        ]
        overhead = prefill.request_overhead_s
    else:
        agg = PerfModel.from_spec(sim_spec(recipe, hardware, model, "aggregated"), tuning)
        pools = [_Pool(Scheduler(agg.pooled(topology.replicas)), visible=True)]
        overhead = agg.request_overhead_s
        prefill = agg
    warm = default_warmup(len(requests), concurrency) if warmup is None else warmup
    run = _Run(pools, list(requests), concurrency, overhead, prefill, warm)
    run.go()
    result = run.result(recipe, hardware, total_gpus(topology), target)
    return result.model_copy(update={"rate": rate})


@dataclass
class _Pool:
    scheduler: Scheduler
    visible: bool  # clients see its tokens (aggregated, decode)
    busy_until: float | None = None
    started: float = 0.0
    span: Span | None = None


class _Run:
    """The virtual-time event loop and what it records."""

    def __init__(
        self,
        pools: list[_Pool],
        requests: list[Request],
        concurrency: int | None,
        overhead: float,
        prefill: PerfModel,
        warmup: int,
    ) -> None:
        self.pools = pools
        self.requests = requests
        self.concurrency = concurrency
        self.overhead = overhead
        self.prefill = prefill
        self.warmup = warmup
        n = len(requests)
        self.sent = [0.0] * n
        self.first = [0.0] * n
        self.last = [0.0] * n
        self.done = [-1.0] * n
        self.out = [0] * n
        self.itl: list[tuple[float, int]] = []
        self.emitted: list[tuple[float, float]] = []  # (step end, output tokens)
        self.prompted: list[tuple[float, int]] = []  # (first token, prompt tokens)
        self.heap: list[tuple[float, int, int, int]] = []  # (time, seq, pool, request)
        self.seq = 0
        self.next_send = 0
        self.finished = 0
        self.errors = 0  # requests too large for the deployment

    def go(self) -> None:
        if self.concurrency is None:
            for i, request in enumerate(self.requests):
                self._send(i, request.at_s or 0.0)
            self.next_send = len(self.requests)
        else:
            while self.next_send < min(self.concurrency, len(self.requests)):
                self._send(self.next_send, 0.0)
                self.next_send += 1
        while self.finished < len(self.requests):
            times = [p.busy_until for p in self.pools if p.busy_until is not None]
            if self.heap:
                times.append(self.heap[0][0])
            if not times:
                raise RuntimeError("the simulation stalled with requests unfinished")
            now = min(times)
            for pool in self.pools:
                if pool.busy_until is not None and pool.busy_until <= now:
                    self._complete(pool)
            while self.heap and self.heap[0][0] <= now:
                _, _, target, i = heapq.heappop(self.heap)
                self._deliver(target, i, now)
            for index, pool in enumerate(self.pools):
                if pool.busy_until is None and not pool.scheduler.idle:
                    self._start(index, pool, now)

    def _send(self, i: int, at: float) -> None:
        self.sent[i] = at
        self._push(at + self.overhead, 0, i)

    def _push(self, at: float, pool: int, i: int) -> None:
        heapq.heappush(self.heap, (at, self.seq, pool, i))
        self.seq += 1

    def _deliver(self, target: int, i: int, now: float) -> None:
        request = self.requests[i]
        scheduler = self.pools[target].scheduler
        try:
            # A benchmark's requests run to their length (denv bench, vLLM bench serve and
            # InferenceX send ignore_eos), which SGLang's admission tells apart.
            if len(self.pools) == 2 and target == 0:  # prefill: the prompt, then the hand-off
                scheduler.add(str(i), request.prompt, request.blocks, 1, ignore_eos=True)
            elif len(self.pools) == 2:
                scheduler.add(str(i), request.prompt, (), request.output, ignore_eos=True)
            else:
                scheduler.add(
                    str(i), request.prompt, request.blocks, request.output, ignore_eos=True
                )
        except RequestTooLarge:  # an engine answers 400; the client moves on
            self.errors += 1
            self._finished(now)

    def _finished(self, at: float) -> None:
        self.finished += 1
        if self.concurrency is not None and self.next_send < len(self.requests):
            self._send(self.next_send, at)
            self.next_send += 1

    def _start(self, index: int, pool: _Pool, now: float) -> None:
        horizon = self.heap[0][0] if self.heap else float("inf")
        for other in self.pools:
            if other is not pool and other.busy_until is not None:
                horizon = min(horizon, other.busy_until)
        span = pool.scheduler.advance(horizon - now)
        if span is None:
            return
        pool.span, pool.started = span, now
        pool.busy_until = now + sum(span.durations)

    def _complete(self, pool: _Pool) -> None:
        span = pool.span
        assert span is not None and pool.busy_until is not None
        end = pool.busy_until
        pool.busy_until, pool.span = None, None
        if not pool.visible:
            for rid in span.finished:
                i = int(rid)
                self._push(end + self.prefill.kv_transfer_s(self.requests[i].prompt), 1, i)
            return
        first_end = pool.started + span.durations[0]
        counted = 0
        for rid, n in span.tokens.items():
            i = int(rid)
            measured = i >= self.warmup
            if self.out[i] == 0:
                self.first[i] = first_end
                if measured:
                    self.prompted.append((first_end, self.requests[i].prompt))
            elif measured:
                self.itl.append((first_end - self.last[i], 1))
            if measured:
                counted += 1
            self.out[i] += n
            self.last[i] = end
        if counted and len(span.durations) > 1:
            self.itl.extend((d, counted) for d in span.durations[1:])
        total = sum(span.tokens.values())
        if total:
            share, at = total / len(span.durations), pool.started
            for d in span.durations:
                at += d
                self.emitted.append((at, share))
        for rid in span.finished:
            self.done[int(rid)] = end
            self._finished(end)

    def meets(self, i: int, target: LatencyTarget | None) -> bool:
        """Whether request `i` meets every objective (bench/metrics.py's `meets`)."""
        if target is None:
            return True
        tpot = (self.done[i] - self.first[i]) / (self.out[i] - 1) if self.out[i] > 1 else None
        figures = {
            "ttft": self.first[i] - self.sent[i],
            "e2e": self.done[i] - self.sent[i],
            "tpot": tpot,
            "itl": tpot,
        }
        for slo in target.slos:
            value = figures[slo.metric]
            if value is not None and value * 1000 > slo.max_ms:
                return False
        return True

    def result(
        self, recipe: Recipe, hardware: Hardware, gpus: int, target: LatencyTarget | None = None
    ) -> Prediction:
        n = len(self.requests)
        measured = [i for i in range(min(self.warmup, n - 1), n) if self.done[i] >= 0]
        if not measured:
            raise PredictionError(
                f"none of the {n} requests fits {recipe.id} on {hardware.id}: each one's prompt "
                "and output exceed the context limit or one replica's KV memory"
            )
        start = min(self.sent[i] for i in measured)
        end = max(self.done[i] for i in measured)
        window = max(end - start, 1e-9)
        output = sum(n for at, n in self.emitted if start < at <= end)
        prompt = sum(n for at, n in self.prompted if start < at <= end)
        ttft = [self.first[i] - self.sent[i] for i in measured]
        e2e = [self.done[i] - self.sent[i] for i in measured]
        tpot = [
            (self.done[i] - self.first[i]) / (self.out[i] - 1) for i in measured if self.out[i] > 1
        ]
        good = sum(1 for i in measured if self.meets(i, target))
        arrivals = [self.sent[i] for i in range(min(self.warmup, n - 1), n)]
        return Prediction(
            ttft_ms=pcts_ms(ttft),
            tpot_ms=pcts_ms(tpot) if tpot else pcts_ms([0.0]),
            itl_ms=pcts_ms_weighted(self.itl) if self.itl else pcts_ms([0.0]),
            output_tok_s=round(output / window, 3),
            output_tok_s_per_gpu=round(output / window / gpus, 3),
            total_tok_s_per_gpu=round((output + prompt) / window / gpus, 3),
            e2e_ms=pcts_ms(e2e),
            recipe=recipe.id,
            hardware=hardware.id,
            gpus=gpus,
            concurrency=self.concurrency,
            requests=len(measured),
            warmup=min(self.warmup, n - 1),
            errors=self.errors,
            duration_s=round(window, 6),
            goodput_rps=round(good / window, 3),
            good=good,
            output_tokens=sum(self.out[i] for i in measured),
            arrival_rps=None if self.concurrency is not None else _rate(arrivals),
            answer_rps=None
            if self.concurrency is not None
            else _rate([self.done[i] for i in measured]),
        )


def _rate(times: Sequence[float]) -> float | None:
    """Events per second from the first to the last (bench/saturation.py's rate)."""
    span = max(times) - min(times) if times else 0.0
    return round((len(times) - 1) / span, 3) if span > 0 else None
