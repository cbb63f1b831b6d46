"""vLLM's CPU build deployed by denv, end to end, on this machine's cores: the runtime built by
the agent, two replicas behind the real sglang-router, readiness as denv judges it, /metrics
under the names denv's alarms read (and diffed with the simulator's), the official openai
client through the router, `denv parity run` between the replicas, a rolling replace under
light load with no failed request, and `denv bench run` at two concurrency levels.

The tests of this module run in order on one deployment (each engine start costs a minute or
more); a failure shows the engines' own last log lines."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from reconciler.bench.results import read_result
from reconciler.engines.vllm.card import ALARM_SERIES
from reconciler.rollout.series import parse, read_as
from tests.e2e.load import ask, light_load
from tests.engines.sim.test_metrics_real import documented, families, group, simulated
from tests.labs.operated import actions_done
from tests.real_engine.lab import CORES, RECIPE_ID, RUNTIME, CpuLab, make_lab

pytestmark = pytest.mark.real_engine

PARITY_PROMPTS = 24  # of the default suite, greedy, each to both replicas
# Characters of a suite line: the tiny model's tokenizer (trained on five sentences) spends a
# token on nearly every byte of other text, and the recipe's context is 1,024 tokens.
SHORT_PROMPT = 360


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CpuLab]:
    found = make_lab(tmp_path_factory.mktemp("real-engine"))
    yield found
    found.stop_all()  # never leave an engine behind, also when a test failed


def endpoint(lab: CpuLab) -> str:
    [row] = [d for d in lab.status()["deployments"] if d["fleet"] == "cpu"]
    return f"{row['endpoint']}/v1"


def engines(lab: CpuLab) -> list[Any]:
    return [u for u in lab.units() if u.alive and u.labels.get("role") != "router"]


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        text: str = answer.read().decode()
        return text


def client(lab: CpuLab) -> openai.OpenAI:
    return openai.OpenAI(base_url=endpoint(lab), api_key="unused", max_retries=0, timeout=60)


def test_deploys_two_replicas_of_the_cpu_build_behind_the_router(lab: CpuLab) -> None:
    lab.release(batch=8)
    done = lab.reconcile()
    assert done.returncode == 0, done.stdout + done.stderr + lab.engine_logs()
    assert actions_done(done.stdout)["start"] == 3, done.stdout + done.stderr  # engines, router
    [row] = [d for d in lab.status()["deployments"] if d["fleet"] == "cpu"]
    assert (row["ready"], row["replicas"], row["drift"]) == (2, 2, ""), row
    running = engines(lab)
    assert sorted(g for u in running for g in u.gpus) == list(range(CORES))
    for unit in running:  # the agent's venv of the CPU build, on the server module
        assert unit.argv[0].endswith(f"/engines/{RUNTIME}/bin/python"), unit.argv
        assert unit.argv[1:3] == ("-m", "vllm.entrypoints.openai.api_server"), unit.argv
        assert "--kv-cache-memory-bytes" in unit.argv and "--enforce-eager" in unit.argv
    shown = lab.denv("fleet", "runtimes", "cpu", "--json")
    assert shown.returncode == 0, shown.stderr
    assert RUNTIME in shown.stdout


def test_the_openai_client_is_answered_through_the_router(lab: CpuLab) -> None:
    talk = client(lab)
    chat = talk.chat.completions.create(
        model="tiny", messages=[{"role": "user", "content": "hello"}], max_tokens=8
    )
    assert chat.choices[0].message.content and chat.usage and chat.usage.completion_tokens == 8
    streamed = talk.completions.create(model="tiny", prompt="denv rolls", max_tokens=6, stream=True)
    assert sum(1 for chunk in streamed if chunk.choices and chunk.choices[0].text) >= 1
    with pytest.raises(openai.NotFoundError):  # the engine's own 404 for a model it lacks
        talk.chat.completions.create(
            model="another", messages=[{"role": "user", "content": "hi"}], max_tokens=2
        )


def test_metrics_carry_every_alarm_series_under_denvs_names(lab: CpuLab) -> None:
    wanted = frozenset(ALARM_SERIES.metrics)
    gauges = {m for m in wanted if read_as(m) == "gauge"}
    for unit in engines(lab):
        assert unit.port is not None
        ask(f"http://127.0.0.1:{unit.port}/v1", model="tiny")  # the router may favour one
        seen = parse(ALARM_SERIES, scrape(unit.port), wanted)
        assert set(seen.gauges) == gauges, unit.id
        assert seen.counters["requests"] >= 1 and seen.counters["error_rate"] == 0, seen.counters
        for metric in ("ttft", "e2e", "queue_time"):  # every answered request observed
            assert seen.histograms[metric].count >= 1, (unit.id, metric)


def test_the_simulators_metrics_differ_from_the_live_engines_only_as_documented(
    lab: CpuLab,
) -> None:
    [unit, *_] = engines(lab)
    assert unit.port is not None
    live, sim = families(scrape(unit.port)), simulated()
    differ = {group(n) for n in set(sim) ^ set(live)}
    for name in set(sim) & set(live):
        if (sim[name].kind, sim[name].labels) != (live[name].kind, live[name].labels):
            differ.add(name)
    assert differ == documented()


def test_parity_between_the_two_replicas_passes(lab: CpuLab) -> None:
    urls = [f"http://127.0.0.1:{u.port}" for u in engines(lab)]
    suite = lab.folder / "suite.jsonl"
    lines = (lab.repo.path / "policies/parity/default.jsonl").read_text().splitlines()
    short = [line for line in lines if len(line) < SHORT_PROMPT]  # they fit in 1,024 tokens
    suite.write_text("\n".join(short[:PARITY_PROMPTS]) + "\n")
    done = lab.denv(
        "parity", "run", "--reference", urls[0], "--candidate", urls[1],
        "--suite", str(suite), "--mode", "strict", "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr + lab.engine_logs()
    verdict = json.loads(done.stdout)
    assert verdict["headline"] == f"PARITY {PARITY_PROMPTS}/{PARITY_PROMPTS}", verdict


def test_a_changed_setting_rolls_under_light_load_with_no_failed_request(lab: CpuLab) -> None:
    """Two cores, two replicas: no room to surge, so they roll one at a time in place, the
    other serving; the router sends nothing to the one that drains."""
    before = {u.id: u.pid for u in engines(lab)}
    # A slow answer is not a failed one: the CPU build's answers can take more than the e2e
    # tests' 10 s while the other replica starts on a shared 2-core machine; a request sent to
    # a stopped or draining worker still fails (refused, reset, or hung past 60 s).
    with light_load(endpoint(lab), 1, 8, "tiny", timeout=60) as load:
        load.more(3, "traffic before the roll")
        lab.release(batch=4)
        rolled = lab.reconcile()
        load.more(3, "traffic after the roll")
    assert rolled.returncode == 0, rolled.stdout + rolled.stderr + lab.engine_logs()
    assert rolled.stderr.count("~ replace") == 2 and "--max-num-seqs" in rolled.stderr, (
        rolled.stderr
    )
    assert load.failed == [], load.failed[:5]
    after = engines(lab)
    assert {u.id for u in after} == set(before) and all(u.pid != before[u.id] for u in after)
    assert all(u.argv[u.argv.index("--max-num-seqs") + 1] == "4" for u in after)


def test_bench_run_measures_two_concurrency_levels_on_a_trial_core(lab: CpuLab) -> None:
    """The release gives its cores back (a CPU core is a replica's, as a GPU would be), the
    fleet keeps one for trials, and `denv bench run` sweeps two levels there."""
    lab.repo.remove("releases/tiny")
    lab.repo.commit("tiny: removed")
    freed = lab.denv("prune")  # its units are orphans: stopped by hand
    assert freed.returncode == 0, freed.stdout + freed.stderr
    lab.fleet(trial=1)
    out, trace = lab.folder / "out", lab.folder / "short.jsonl"
    # Short requests: the router takes text prompts (a word a token on a usual tokenizer),
    # and the tiny model's tokenizer spends a token on nearly every byte of them.
    line = {"input_length": 48, "output_length": 16}
    trace.write_text(
        "".join(
            json.dumps({"timestamp": i * 100, **line, "hash_ids": [i]}) + "\n" for i in range(16)
        )
    )
    done = lab.denv(
        "bench", "run", "--recipe", RECIPE_ID, "--target", "cpu", "--concurrency", "1,4",
        "--traffic", str(trace), "--requests", "12", "--weights", f"file://{lab.model}",
        "--ready-timeout", "10m", "--out", str(out), "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:] + lab.engine_logs()
    found = [read_result(path) for path in sorted(out.glob("results/**/*.json"))]
    assert sorted(r.load.concurrency or 0 for r in found) == [1, 4], found
    for result in found:
        assert (result.source.kind, result.hardware) == ("measured", "x86-cpu"), result.source
        assert (result.metrics.output_tok_s_per_gpu or 0) > 0, result.metrics
    assert engines(lab) == []  # the trial was torn down
