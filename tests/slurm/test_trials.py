"""Bench runs and optimizer trials on a Slurm fleet, end to end on the lab: their engines run
as jobs in the fleet's trial partition (on n3, the node whose 4 GPUs are the trial GPUs),
and every job of a trial is cancelled when it ends. What ran where is read from Slurm itself
(squeue, watched while the command runs)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.labs.slurm_fleet import SlurmFleet

RECIPE = "llama-3.1-8b/vllm@1"
# No candidate can be 100 times better: each trial is one run, none verified (no parity).
RULES = "optimizer:\n  max_trials: 2\n  repeats: 1\n  min_gain: 100\n"


def trace(folder: Path, requests: int, gap_ms: int = 0) -> Path:
    """Short answers: a run takes a fraction of a second a request."""
    lines = (
        json.dumps({"timestamp": gap_ms * i, "input_length": 600, "output_length": 16,
                    "hash_ids": [1, 100 + i]})
        for i in range(requests)
    )  # fmt: skip
    path = folder / f"trace-{requests}.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


@contextmanager
def watching(fleet: SlurmFleet) -> Iterator[dict[str, dict[str, str]]]:
    """Every job of denv's the queue shows while the block runs: job id -> its last row
    (squeue forgets an ended job after MinJobAge, so it is asked all along)."""
    seen: dict[str, dict[str, str]] = {}
    done = threading.Event()

    def look() -> None:
        while not done.is_set():
            seen.update({row["job"]: row for row in fleet.jobs(active=False)})
            done.wait(0.5)

    watcher = threading.Thread(target=look, daemon=True)
    watcher.start()
    try:
        yield seen
    finally:
        done.set()
        watcher.join(timeout=30)
    seen.update({row["job"]: row for row in fleet.jobs(active=False)})


def trial_jobs(seen: dict[str, dict[str, str]]) -> dict[str, list[dict[str, str]]]:
    """The trials' jobs, by trial (`trial-<id>.<unit>`)."""
    found: dict[str, list[dict[str, str]]] = {}
    for row in seen.values():
        if row["name"].startswith("trial-"):
            found.setdefault(row["name"].split(".")[0], []).append(row)
    return found


def test_a_bench_run_runs_its_engine_as_a_job_in_the_trial_partition(
    slurm_fleet: SlurmFleet, tmp_path: Path
) -> None:
    argv = ["bench", "run", "--target", "hpc", "--recipe", RECIPE, "--ready-timeout", "60s",
            "--traffic", str(trace(tmp_path, 4)), "--concurrency", "2", "--requests", "3",
            "--json"]  # fmt: skip
    with watching(slurm_fleet) as seen:
        done = slurm_fleet.denv(*argv)
    assert done.returncode == 0, done.stdout + done.stderr
    outcome = json.loads(done.stdout)
    assert outcome["trial"]["hosts"] == {"n3": [0]}, outcome["trial"]
    assert [level["load"]["concurrency"] for level in outcome["levels"]] == [2]
    assert len(outcome["results"]) == 1
    [(trial, jobs)] = trial_jobs(seen).items()
    assert [(j["name"], j["partition"], j["nodes"], j["state"]) for j in jobs] == [
        (f"{trial}.aggregated-0", "trial", "n3", "CANCELLED")
    ]
    assert slurm_fleet.jobs() == []  # nothing left in the queue
    assert "- stopped trial" in done.stderr, done.stderr


def test_two_optimizer_trials_run_in_the_trial_partition(slurm_fleet: SlurmFleet) -> None:
    fleet = slurm_fleet
    fleet.repo.write("policies/optimizer.yaml", RULES)
    shape = trace(fleet.repo.path, 24, gap_ms=50).read_text()
    fleet.repo.write("releases/chat-8b/traffic/canary.jsonl", shape)
    fleet.release(replicas=1, batch=4)
    argv = ["optimize", "start", "chat-8b/canary", "--goal", "latency", "--budget-gpus", "2",
            "--levers", "max_batch", "--requests", "24", "--run-seconds", "1s", "--seed", "1",
            "--ready-timeout", "60s", "--json"]  # fmt: skip
    with watching(fleet) as seen:
        done = fleet.denv(*argv)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    state = json.loads(done.stdout)
    assert (state["state"], state["trials"]) == ("finished", 2), state
    trials = trial_jobs(seen)
    # the current release, deployed once for the whole study, and one deployment a trial
    assert len(trials) == 3, trials
    for jobs in trials.values():
        assert [(j["partition"], j["nodes"], j["state"]) for j in jobs] == [
            ("trial", "n3", "CANCELLED")
        ], jobs
    assert fleet.jobs() == []  # every trial's job cancelled


def test_a_trial_whose_job_never_starts_says_why_and_leaves_no_job(
    slurm_fleet: SlurmFleet, tmp_path: Path
) -> None:
    slurm_fleet.lab.run("scontrol", "update", "partitionname=trial", "state=down")
    argv = ["bench", "run", "--target", "hpc", "--recipe", RECIPE, "--ready-timeout", "3s",
            "--traffic", str(trace(tmp_path, 4))]  # fmt: skip
    with watching(slurm_fleet) as seen:
        done = slurm_fleet.denv(*argv)
    assert done.returncode == 1, done.stdout + done.stderr
    [(trial, [job])] = trial_jobs(seen).items()
    assert job["state"] == "CANCELLED", job
    assert (
        f"{trial}.aggregated-0 on n3: job {job['job']} still pending in partition trial "
        "after 3s (PartitionDown)"
    ) in done.stderr, done.stderr
    assert slurm_fleet.jobs() == []
