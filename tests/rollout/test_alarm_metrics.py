"""The alarm-metric seam: a metric added from outside the package — one row in the table
(reconciler/spec/alarm_metrics.py) and its series in each card — is accepted by the policy,
read from an engine's /metrics and fires; and every list of alarm metrics is the table's."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from pydantic import ValidationError

from reconciler.engines.cards import card, cards
from reconciler.engines.sim.argv import RUNNING
from reconciler.engines.units import Metrics, Series
from reconciler.reconcile import probes
from reconciler.rollout.promql import queries
from reconciler.rollout.series import REQUESTS, ROUTERS, at_routers, parse, read_as
from reconciler.rollout.watch import AlarmWatch
from reconciler.spec.alarm_metrics import ALARM_METRICS, AlarmMetric, alarm_metric_names
from reconciler.spec.loader import open_repo
from reconciler.spec.policy import Alarm
from reconciler.spec.schema import schema_for
from tests.conftest import ROOT, Edit
from tests.engines.sim.sims import Sim, engine_unit, http_get, sim_process, sim_spec, wait_until
from tests.labs.sims import traffic
from tests.rollout.prometheus import Lab, lab, seen

__all__ = ["lab"]  # fixtures

# The new metric: tokens generated per request, a counter over the requests counter.
NAME = "output_tokens"
ROW = AlarmMetric("ratio", "count", "tokens generated per request")
# Each card's name for it (the simulator serves vLLM's names).
SERIES = {
    "vllm": Series("vllm:generation_tokens_total"),
    "sim": Series("vllm:generation_tokens_total"),
    "sglang": Series("sglang:generation_tokens_total"),
}
T0 = 1_800_000_000.0


@pytest.fixture
def added(monkeypatch: pytest.MonkeyPatch) -> None:
    """The row in the table and each card's series, as a new metric would add them."""
    monkeypatch.setitem(ALARM_METRICS, NAME, ROW)
    modules = cards()  # every card imported before any is patched (the simulator's takes
    for engine, series in SERIES.items():  # vLLM's series when it is imported)
        module = modules[engine]
        mapped = {**module.ALARM_SERIES.metrics, NAME: series}
        monkeypatch.setattr(module, "ALARM_SERIES", replace(module.ALARM_SERIES, metrics=mapped))


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sim]:
    with sim_process(sim_spec(time_scale=10.0), tmp_path_factory.mktemp("sim")) as running:
        wait_until(lambda: http_get(running.url + "/health")[0] == 200, 20, "warm-up")
        yield running


def test_a_policy_naming_the_new_metric_validates(added: None, denv_repo: Path, edit: Edit) -> None:
    assert NAME in schema_for("alarms")["$defs"]["Alarm"]["properties"]["metric"]["enum"]
    edit("policies/alarms.yaml", "metric: kv_usage, max: 95%", f"metric: {NAME}, max: 64")
    repo = open_repo(denv_repo)
    assert repo.errors == []
    assert repo.policies.alarms["kv-usage-95pct"] == Alarm(
        metric=NAME, max=64, window=600, min_requests=1
    )


def test_a_policy_naming_an_unknown_metric_fails_with_the_known_ones(
    added: None, denv_repo: Path, edit: Edit
) -> None:
    edit("policies/alarms.yaml", "metric: kv_usage", "metric: tokens")
    (problem,) = [str(p) for p in open_repo(denv_repo).errors if "alarms.yaml" in p.path]
    assert problem.startswith("policies/alarms.yaml:7:29: alarms.kv-usage-95pct.metric: ")
    assert "unknown alarm metric 'tokens' (known: ttft, tpot, itl" in problem
    assert problem.endswith(f"error_rate, {NAME})")


def test_the_renamed_queue_gauge_is_refused_with_its_new_name() -> None:
    with pytest.raises(ValidationError, match="'queue' is now 'waiting'"):
        Alarm(metric="queue", max=10)
    assert Alarm(metric="waiting", max=10).max == 10


def test_the_new_metric_is_read_from_the_simulators_metrics_and_fires(
    added: None, sim: Sim
) -> None:
    alarms = {"tokens-1": Alarm(metric=NAME, max=1, window="1m", min_requests=12)}
    watch, targets, key = AlarmWatch(alarms), [("sim", sim.url + "/metrics")], "chat/tokens"
    watch.scrape(key, targets, T0)
    assert traffic(sim, 12) == [200] * 12  # two tokens each
    watch = AlarmWatch(alarms, state=json.loads(json.dumps(watch.state())))  # the next run
    watch.scrape(key, targets, T0 + 60)
    (reading,) = watch.readings(key, T0 + 60)
    assert reading.firing and reading.value == 2.0 and reading.requests == 12
    assert reading.describe() == f"{NAME} 2 > 1 (12 requests, 1m)"


def test_the_new_metric_is_read_from_sglang_text_and_asked_of_prometheus(added: None) -> None:
    text = (
        "# TYPE sglang:num_requests_total counter\nsglang:num_requests_total 4\n"
        "# TYPE sglang:generation_tokens_total counter\nsglang:generation_tokens_total 40\n"
    )
    got = parse(card("sglang").ALARM_SERIES, text, frozenset({NAME}))
    assert got.counters == {"requests": 4.0, NAME: 40.0}
    asked = queries(Alarm(metric=NAME, max=1), card("vllm").ALARM_SERIES, ["10.0.0.1:8001"])
    assert asked.counted is not None and "vllm:generation_tokens_total{" in asked.counted
    assert asked.value is None
    assert not at_routers(NAME)  # no router maps it: the engines' alone


def test_the_new_metric_fires_in_prometheus_mode(added: None, lab: Lab) -> None:
    """The PromQL for a ratio, asked of a real Prometheus scraping two simulators."""
    assert traffic(lab.sims, 12) == [200] * 24
    alarm = Alarm(metric=NAME, max=1, window="1m", min_requests=20)
    reading = seen(lab, alarm, lambda r: r.firing, f"the {NAME} alarm to fire")
    assert reading.value == pytest.approx(2.0, rel=0.25), reading.describe()


def test_every_list_of_alarm_metrics_is_the_tables(added: None) -> None:
    names = alarm_metric_names()
    assert names[-1] == NAME and REQUESTS not in names  # a scrape keeps that counter apart
    assert schema_for("alarms")["$defs"]["Alarm"]["properties"]["metric"]["enum"] == list(names)
    assert {name: read_as(name) for name in names} == {n: r.read for n, r in ALARM_METRICS.items()}
    for name, row in ALARM_METRICS.items():
        if row.unit == "seconds":  # given with a unit, as every latency is
            assert Alarm(metric=name, stat="p99", max="250ms").max == 0.25
        elif row.unit == "fraction":
            assert Alarm(metric=name, max="5%").max == 0.05


def test_cards_and_routers_map_only_the_tables_metrics() -> None:
    names = set(alarm_metric_names())
    served: set[str] = set()
    for engine, module in cards().items():
        assert set(module.ALARM_SERIES.metrics) <= names, engine
        served |= set(module.ALARM_SERIES.metrics)
    for router, series in ROUTERS.items():
        assert set(series.metrics) <= names, router
    assert served == names  # every metric is exported by at least one engine


def test_the_docs_table_lists_every_alarm_metric() -> None:
    text = (ROOT / "docs/stages.md").read_text()
    section = text[text.index("| alarm metric |") :].split("\n\n", 1)[0]
    listed = re.findall(r"^\| `([a-z0-9_]+)`", section, re.M)
    assert listed == list(alarm_metric_names())


def test_a_units_metrics_name_the_running_gauge_a_stop_waits_on(sim: Sim) -> None:
    """Besides the alarm metrics, the one name a unit carries: what `in_flight` reads."""
    unit = engine_unit(sim)
    assert unit.metrics is not None and probes.in_flight(unit) is None  # no name: unknown
    port = unit.metrics.port
    named = unit.model_copy(update={"metrics": Metrics(port=port, running=RUNNING)})
    assert probes.in_flight(named) == 0.0  # idle
