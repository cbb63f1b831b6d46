"""Models: the alarm metrics — every metric an alarm (policies/alarms.yaml) may name, in one
table, and the lists derived from it.

A row says how the metric is read and in what unit its `max` is written; the policy's
allowed names and its JSON schema, the series the rollout reads and how it judges them, and
how a value is shown all come from here. Each engine card maps the names to its Prometheus
series (`ALARM_SERIES`); a metric a card does not map is absent on that engine (an alarm on
it is not judged there).

Adding an alarm metric: one row here, and its series in each card that exports it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic_core import PydanticCustomError

# histogram: a latency histogram, judged by a percentile or mean over the window's difference;
# gauge: a value now, judged over the samples taken inside the window (the busiest engine's);
# ratio: a counter's increase over that of the requests answered (routers' included).
Read = Literal["histogram", "gauge", "ratio"]
# seconds: `max` a duration ('1.5s', '50ms'); fraction: 0..1 or '1%'; count: a plain number.
Unit = Literal["seconds", "fraction", "count"]


@dataclass(frozen=True)
class AlarmMetric:
    read: Read
    unit: Unit
    what: str  # one line: what the metric is


# The order is the order metrics are listed in (schemas, messages, docs).
ALARM_METRICS: dict[str, AlarmMetric] = {
    "ttft": AlarmMetric("histogram", "seconds", "time to first token"),
    "tpot": AlarmMetric("histogram", "seconds", "time per output token, per request"),
    "itl": AlarmMetric("histogram", "seconds", "time between streamed tokens"),
    "e2e": AlarmMetric("histogram", "seconds", "arrival to last token"),
    "queue_time": AlarmMetric("histogram", "seconds", "time a request waited to be scheduled"),
    "waiting": AlarmMetric("gauge", "count", "requests waiting to be scheduled"),
    "kv_usage": AlarmMetric("gauge", "fraction", "KV cache in use, 0..1"),
    "error_rate": AlarmMetric("ratio", "fraction", "requests answered with a 5xx or aborted"),
}

# Names an earlier release of denv accepted, and what they are now: named in the refusal.
RENAMED = {"queue": "waiting"}


def alarm_metric_names() -> tuple[str, ...]:
    """Every alarm metric's name, in the table's order."""
    return tuple(ALARM_METRICS)


def alarm_metric(name: str) -> AlarmMetric:
    """The row of a metric in the table (a pydantic error naming the known ones when absent:
    validation reports it at the field, as a value outside a Literal)."""
    row = ALARM_METRICS.get(name)
    if row is None:
        known = ", ".join(alarm_metric_names())
        renamed = f"; '{name}' is now '{RENAMED[name]}'" if name in RENAMED else ""
        raise PydanticCustomError(
            "alarm_metric",
            "unknown alarm metric '{name}' (known: {known}){renamed}",
            {"name": name, "known": known, "renamed": renamed},
        )
    return row
