"""The load generators benchmarks/loadgen_overhead.py runs beside denv's — GuideLLM, NVIDIA's
AIPerf and the Kubernetes serving group's inference-perf, each from its own git-ignored venv —
and the one way every client's CPU is counted: a cgroup of its own, so that whatever processes
a client starts (workers, record processors, a message bus) are counted, waited for or not.

    python3 -m venv benchmarks/.venv-guidellm
    benchmarks/.venv-guidellm/bin/pip install guidellm==0.8.1
    python3 -m venv benchmarks/.venv-aiperf
    benchmarks/.venv-aiperf/bin/pip install aiperf==0.13.0
    python3.12 -m venv benchmarks/.venv-inference-perf
    benchmarks/.venv-inference-perf/bin/pip install inference-perf==0.7.0

Neither AIPerf nor inference-perf pulls torch; GuideLLM 0.8.1 does (its wheel's dependency).
Needs root (the cgroup) and a cgroup v2 tree or v1's cpuacct.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
VENVS = {
    "guidellm": BENCH / ".venv-guidellm" / "bin",
    "aiperf": BENCH / ".venv-aiperf" / "bin",
    "inference-perf": BENCH / ".venv-inference-perf" / "bin",
}
PACKAGES = {"guidellm": "guidellm", "aiperf": "aiperf", "inference-perf": "inference-perf"}
CLIENT_CPU = 1
_GROUPS = itertools.count()

# -- CPU of a whole process tree ----------------------------------------------------------


@dataclass(frozen=True)
class CpuGroup:
    """A cgroup a client runs in: every process it starts stays in it."""

    folder: Path
    usage: Path  # cumulative CPU of its processes
    per_second: float  # units of `usage` per second

    def seconds(self) -> float:
        text = self.usage.read_text()
        if self.usage.name == "cpu.stat":  # v2: "usage_usec N" among other lines
            text = next(line for line in text.splitlines() if line.startswith("usage_usec"))
            text = text.split()[1]
        return int(text) / self.per_second

    def join(self) -> None:
        (self.folder / "cgroup.procs").write_text(str(os.getpid()))


@contextlib.contextmanager
def cpu_group() -> Iterator[CpuGroup]:
    name = f"denv-loadgen-{os.getpid()}-{next(_GROUPS)}"
    if Path("/sys/fs/cgroup/cgroup.controllers").exists():
        folder = Path("/sys/fs/cgroup") / name
        group = CpuGroup(folder, folder / "cpu.stat", 1e6)
    elif Path("/sys/fs/cgroup/cpuacct/cpuacct.usage").exists():
        folder = Path("/sys/fs/cgroup/cpuacct") / name
        group = CpuGroup(folder, folder / "cpuacct.usage", 1e9)
    else:
        raise SystemExit("no cgroup v2 tree nor v1 cpuacct: cannot count a client's CPU")
    folder.mkdir()
    try:
        yield group
    finally:
        _empty(folder)
        folder.rmdir()


def _empty(folder: Path) -> None:
    """End whatever a client left running in its group (a daemon it did not wait for)."""
    deadline = time.monotonic() + 10
    while (folder / "cgroup.procs").read_text().split():
        if time.monotonic() > deadline:
            _kill(folder)
        time.sleep(0.05)


@dataclass(frozen=True)
class Measured:
    cpu_s: float
    wall_s: float
    stdout: str
    hung: int  # runs that did not end in time, killed and run again


def measured(
    argv: list[str],
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    timeout_s: float = 900,
    tries: int = 1,
) -> Measured:
    """Run a client pinned to CLIENT_CPU in a cgroup of its own; its CPU once all its
    processes have ended. A run still going after `timeout_s` is killed, with everything it
    started, and run again, at most `tries` times in all."""
    for attempt in range(tries):
        with cpu_group() as group:

            def start() -> None:
                group.join()
                os.sched_setaffinity(0, {CLIENT_CPU % (os.cpu_count() or 1)})

            began = time.perf_counter()
            try:
                done = subprocess.run(
                    argv,
                    capture_output=True,
                    text=True,
                    env=env,
                    cwd=cwd,
                    timeout=timeout_s,
                    preexec_fn=start,
                )
            except subprocess.TimeoutExpired:
                _kill(group.folder)
                continue
            wall = time.perf_counter() - began
            _empty(group.folder)
            cpu = group.seconds()
        if done.returncode != 0:
            raise SystemExit(f"{argv[0]} failed:\n{done.stderr[-3000:]}{done.stdout[-2000:]}")
        return Measured(cpu, wall, done.stdout, attempt)
    raise SystemExit(f"{argv[0]} did not end in {timeout_s:.0f} s, {tries} times")


def _kill(folder: Path) -> None:
    for pid in (folder / "cgroup.procs").read_text().split():
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(pid), 9)


def version(peer: str) -> str:
    code = f"import importlib.metadata as m; print(m.version({PACKAGES[peer]!r}))"
    done = subprocess.run(
        [str(VENVS[peer] / "python"), "-c", code], capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def installed(peer: str) -> bool:
    return (VENVS[peer] / "python").exists()


# -- a tokenizer for the peers (none reaches a hub here) -------------------------------------

_TOKENIZER = """
import sys
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast
words = [f"w{i}" for i in range(300)]
corpus = [" ".join(words[(i * 7 + j) % 300] for j in range(40)) for i in range(400)]
tok = Tokenizer(models.BPE())
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tok.decoder = decoders.ByteLevel()
alphabet = pre_tokenizers.ByteLevel.alphabet()
trainer = trainers.BpeTrainer(vocab_size=1000, initial_alphabet=alphabet, special_tokens=["<eos>"])
tok.train_from_iterator(corpus, trainer)
PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<eos>").save_pretrained(sys.argv[1])
"""
HUB_REPO = "denv/bench-tokenizer"


def tokenizer(work: Path) -> Path:
    """A small byte-level BPE trained on the spot (reference/peer-figures.md), saved as a
    folder and, for AIPerf, as a Hugging Face cache snapshot under `work/hf`: AIPerf 0.13.0
    offline loads tokenizers through `snapshot_download`, which refuses a local path."""
    python = next(VENVS[p] / "python" for p in VENVS if installed(p))
    folder = work / "tokenizer"
    done = subprocess.run(
        [str(python), "-c", _TOKENIZER, str(folder)], capture_output=True, text=True
    )
    if done.returncode != 0:
        raise SystemExit(f"could not make the peers' tokenizer:\n{done.stderr[-2000:]}")
    cache = work / "hf" / "hub" / f"models--{HUB_REPO.replace('/', '--')}"
    revision = "0" * 40
    (cache / "refs").mkdir(parents=True)
    (cache / "refs" / "main").write_text(revision)
    shutil.copytree(folder, cache / "snapshots" / revision)
    return folder


def _offline(work: Path) -> dict[str, str]:
    return {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(work / "hf")}


# -- the peers -------------------------------------------------------------------------------
# Each runs one closed-loop point and reports what its own output says: successful requests,
# errors, its benchmark's duration, TTFT p50 and p99 (ms).

Report = dict[str, Any]


def guidellm(
    url: str, model: str, trace: Path, work: Path, profile: dict[str, Any], seconds: float
) -> Report:
    """Bounded by time; reads the Mooncake trace with its own `mooncake` reader."""
    out = work / "guidellm.json"
    data = {"kind": "mooncake", "source": {"kind": "json_file", "path": str(trace)}}
    argv = [
        str(VENVS["guidellm"] / "guidellm"),
        "run",
        "--backend",
        f"kind=openai_http,target={url},model={model}",
        "--data",
        json.dumps(data),
        "--tokenizer",
        f"kind=hf_auto,model={work / 'tokenizer'}",
        "--profile",
        json.dumps(profile),
        "--constraint",
        f"kind=max_duration,seconds={seconds}",
        "--output",
        f"kind=json,path={out}",
        "--disable-console",
    ]
    env = {**_offline(work), "GUIDELLM__LOGGING__CONSOLE_LOG_LEVEL": "ERROR"}
    # GuideLLM 0.8.1 now and then never exits after writing its report (its worker processes
    # idle, nothing sent; vllm-project/guidellm#1152): such a run is killed and repeated.
    run = measured(argv, env, timeout_s=2 * seconds + 120, tries=3)
    bench = json.loads(out.read_text())["benchmarks"][0]
    totals = bench["metrics"]["request_totals"]
    ttft = bench["metrics"]["time_to_first_token_ms"]["successful"]
    seen = ttft["count"] > 0  # GuideLLM leaves it empty when chunks come back to back
    return {
        "requests": int(totals["successful"]),
        "errors": int(totals["errored"]),
        "duration_s": bench["duration"],
        "ttft_p50_ms": ttft["percentiles"]["p50"] if seen else float("nan"),
        "ttft_p99_ms": ttft["percentiles"]["p99"] if seen else float("nan"),
        "cpu_s": run.cpu_s,
        "wall_s": run.wall_s,
        "hung": run.hung,
    }


def aiperf(url: str, model: str, trace: Path, work: Path, concurrency: int, count: int) -> Report:
    """Bounded by count; reads the Mooncake trace (`mooncake_trace`) in closed loop
    (`--no-fixed-schedule`); output tokens from the server's usage, not re-tokenized (its
    cheapest documented way to count them); no UI, no server metrics or GPU telemetry."""
    out = work / "aiperf"
    shutil.rmtree(out, ignore_errors=True)
    argv = [
        str(VENVS["aiperf"] / "aiperf"),
        "profile",
        "--model",
        model,
        "--url",
        url,
        "--endpoint-type",
        "completions",
        "--streaming",
        "--tokenizer",
        HUB_REPO,
        "--input-file",
        str(trace),
        "--custom-dataset-type",
        "mooncake_trace",
        "--no-fixed-schedule",
        "--concurrency",
        str(concurrency),
        "--request-count",
        str(count),
        "--use-server-token-count",
        "--ui",
        "none",
        "--no-server-metrics",
        "--no-gpu-telemetry",
        "--output-artifact-dir",
        str(out),
    ]
    run = measured(argv, _offline(work), cwd=work)
    report = json.loads((out / "profile_export_aiperf.json").read_text())
    ttft = report["time_to_first_token"]
    return {
        "requests": int(report["request_count"]["avg"]),
        "errors": sum(int(e.get("count", 1)) for e in report.get("error_summary") or []),
        "duration_s": report["benchmark_duration"]["avg"],
        "ttft_p50_ms": ttft["p50"],
        "ttft_p99_ms": ttft["p99"],
        "cpu_s": run.cpu_s,
        "wall_s": run.wall_s,
    }


def inference_perf(url: str, model: str, work: Path, concurrency: int, count: int) -> Report:
    """Bounded by count; no Mooncake reader, so its `random` data at the trace's fixed
    lengths (128 in, 64 out); one worker process, as the client has one core (its default
    is one per CPU the machine has)."""
    out = work / "inference-perf"
    shutil.rmtree(out, ignore_errors=True)
    fixed = {"type": "fixed", "std_dev": 0}
    config = {
        "api": {"type": "completion", "streaming": True},
        "data": {
            "type": "random",
            "input_distribution": {**fixed, "min": 128, "max": 128, "mean": 128},
            "output_distribution": {**fixed, "min": 64, "max": 64, "mean": 64},
        },
        "load": {
            "type": "concurrent",
            "stages": [{"num_requests": count, "concurrency_level": concurrency}],
            "num_workers": 1,
        },
        "server": {"type": "vllm", "model_name": model, "base_url": url, "ignore_eos": True},
        "tokenizer": {"pretrained_model_name_or_path": str(work / "tokenizer")},
        "storage": {"local_storage": {"path": str(out)}},
    }
    path = work / "inference-perf.json"  # YAML is a superset of JSON
    path.write_text(json.dumps(config))
    argv = [str(VENVS["inference-perf"] / "inference-perf"), "-c", str(path)]
    run = measured([*argv, "--log-level", "ERROR"], _offline(work), cwd=work)
    stage = json.loads((out / "stage_0_lifecycle_metrics.json").read_text())
    ttft = stage["successes"]["latency"]["time_to_first_token"]
    return {
        "requests": int(stage["successes"]["count"]),
        # A prompt its generator cannot make at exactly 128 tokens of this small tokenizer is
        # never sent; count it with the failures.
        "errors": int(stage["failures"]["count"]) + count - int(stage["load_summary"]["count"]),
        "duration_s": stage["benchmark_time_seconds"],
        "ttft_p50_ms": ttft["median"] * 1000,
        "ttft_p99_ms": ttft["p99"] * 1000,
        "cpu_s": run.cpu_s,
        "wall_s": run.wall_s,
    }


CountBound = Callable[[int], Report]
