"""Prometheus mode for real: two `denv sim serve` engines (vLLM's series) scraped every second
by a real Prometheus on loopback while the openai client sends traffic, faults injected
through /admin/faults. The PromQL denv writes runs on Prometheus itself, and its answers are
compared with what denv reads scraping the same engines directly."""

from __future__ import annotations

import bisect
import time

from reconciler.engines.cards import card
from reconciler.engines.sim.metrics import TTFT_BUCKETS
from reconciler.rollout.alarms import Reading
from reconciler.rollout.promql import queries
from reconciler.rollout.watch import AlarmWatch
from reconciler.spec.policy import Alarm
from tests.engines.sim.sims import free_port, wait_until
from tests.labs.sims import faults, traffic
from tests.rollout.prometheus import (
    KEY,
    SCRAPE_S,
    Lab,
    lab,
    prometheus_reading,
    scraped_since,
    seen,
)

__all__ = ["lab"]  # fixtures

TTFT = Alarm(metric="ttft", stat="p99", max="250ms", window="1m", min_requests=20)
ERRORS = Alarm(metric="error_rate", max="1%", window="1m", min_requests=20)


def bucket(value: float) -> int:
    return bisect.bisect_left(TTFT_BUCKETS, value)


def test_prometheus_answers_what_scraping_the_engines_reads(lab: Lab) -> None:
    direct = AlarmWatch({"alarm": TTFT})
    direct.scrape(KEY, lab.targets, 0.0)
    assert traffic(lab.sims, 30) == [200] * 60
    direct.scrape(KEY, lab.targets, 60.0)
    [engines] = direct.readings(KEY, 60.0)
    served = seen(lab, TTFT, lambda r: r.requests >= 60, "Prometheus seeing the 60 requests")
    print(f"engines: {engines.describe()}; Prometheus: {served.describe()}")
    assert engines.requests == 60 and engines.value is not None
    # increase() extrapolates towards the window's ends: a few more than were answered
    assert 60 <= served.requests <= 60 * 1.25, served.describe()
    # both interpolate inside the same buckets: the same bucket, whatever the extrapolation
    assert served.value is not None and bucket(served.value) == bucket(engines.value)
    # 250 ms is a bucket bound: decided exactly, so both fire or neither does
    assert served.covered == 60 and served.firing == engines.firing
    # over the bake: every request since Prometheus first saw the engines
    watch = AlarmWatch({"alarm": TTFT}, prometheus=lab.prometheus)
    now = time.time()
    watch.scrape(KEY, lab.targets, now)
    [bake] = watch.over_bake(KEY, lab.started - SCRAPE_S, now)
    assert bake.requests >= 60 and bake.over.endswith(" bake")


def test_a_latency_spike_fires_in_prometheus_mode(lab: Lab) -> None:
    faults(lab.sims, spike_ms=5000)  # +0.5 s a step at time scale 10
    try:
        assert traffic(lab.sims, 12) == [200] * 24
    finally:
        faults(lab.sims, spike_ms=0)
    reading = seen(lab, TTFT, lambda r: r.firing, "the TTFT alarm firing")
    assert reading.firing and reading.value is not None and reading.value > 0.5
    assert reading.describe().startswith("ttft p99 ") and "> 250 ms" in reading.describe()


def test_errors_counted_by_prometheus_fire_the_error_alarm(lab: Lab) -> None:
    faults(lab.sims, error_rate=0.5, seed=3)
    try:
        statuses = traffic(lab.sims, 20)
    finally:
        faults(lab.sims, error_rate=0.0)
    failed = statuses.count(500)
    assert 0 < failed < 40 and statuses.count(200) == 40 - failed
    reading = seen(
        lab, ERRORS, lambda r: (r.value or 0) * r.requests >= failed - 0.5, "the errors counted"
    )
    assert reading.firing and reading.value is not None
    counted = reading.value * reading.requests  # the window's errors, as Prometheus has them
    assert failed - 0.5 <= counted <= failed * 1.25 + 1, (failed, reading.describe())


def test_no_data_and_no_answer_never_fire(lab: Lab) -> None:
    elsewhere = [("vllm", f"http://127.0.0.1:{free_port()}/metrics")]  # nothing scrapes it
    quiet = prometheus_reading(lab, TTFT, elsewhere)
    assert quiet.value is None and not quiet.firing and quiet.requests == 0
    down = f"http://127.0.0.1:{free_port()}"
    watch = AlarmWatch({"alarm": TTFT}, prometheus=down)
    watch.scrape(KEY, lab.targets, time.time())
    [reading] = watch.readings(KEY, time.time())
    assert reading.value is None and not reading.firing
    assert reading.note.startswith("Prometheus did not answer: "), reading.note


def test_the_promql_picks_the_stage_engines_by_instance() -> None:
    two = ["10.0.0.5:8000", "10.0.0.6:8000"]
    sent = queries(TTFT, card("vllm").ALARM_SERIES, two)
    picked = r'instance=~"10\\.0\\.0\\.5:8000|10\\.0\\.0\\.6:8000"'
    served = f'http_requests_total{{handler=~"/v1/(chat/)?completions",{picked}}}'
    assert sent.requests == (
        f"(sum(increase({served}[60s]) and {served} offset 60s) or vector(0))"
        f" + (sum({served} unless {served} offset 60s) or vector(0))"
    )
    assert sent.value == (
        "histogram_quantile(0.99, sum by (le) "
        f"(rate(vllm:time_to_first_token_seconds_bucket{{{picked}}}[60s])))"
    )


def test_requests_before_the_bake_started_are_never_counted(lab: Lab) -> None:
    """Deploy-time parity's prompts, say: Prometheus keeps them, the bake's window does not
    reach back to them."""
    assert traffic(lab.sims, 30) == [200] * 60
    seen(lab, TTFT, lambda r: r.requests >= 60, "Prometheus seeing the 60 earlier requests")
    since = time.time()  # the bake starts: Prometheus has scraped all 60 by now
    # increase() counts from the window's first sample: what an engine answered before its
    # first scrape inside the bake is not seen (at most one scrape interval's worth). Send the
    # bake's requests once every engine has been scraped since it started.
    wait_until(
        lambda: scraped_since(lab, since), 60, "Prometheus scraping both engines in the bake"
    )
    assert traffic(lab.sims, 5) == [200] * 10
    sent = time.time()
    watch = AlarmWatch({"alarm": TTFT}, prometheus=lab.prometheus)

    def after() -> Reading | None:
        now = time.time()
        if now < sent + 3:  # Prometheus scrapes every second: let it scrape past the last
            return None
        watch.scrape(KEY, lab.targets, now, since)
        [reading] = watch.readings(KEY, now)
        return reading if reading.requests >= 10 else None

    reading = wait_until(after, 60, "Prometheus seeing the requests of the bake")
    # increase() extrapolates to the window's edges (at most window / sample span, under 2
    # here), so about 10, never the 70 that counting the 60 earlier requests would read
    assert 10 <= reading.requests <= 10 * 2, reading.describe()
    assert reading.covered < TTFT.window
