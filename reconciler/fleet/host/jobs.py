"""Prepare jobs: making a unit's runtime and weights ready, detached from the SSH session that
asked, with progress in a state file the bot polls (`prepare` starts or joins a job and waits
a little; asking again is how the bot follows it). A job killed at any point is started again
by the next `prepare`; every step it runs is idempotent."""

import os
import signal
import time

import runtimes
import weights
from common import (
    JOBS,
    AgentError,
    alive,
    child_environment,
    detach,
    read_json,
    start_time,
    write_atomic,
)

REPORT_EVERY = 0.5  # seconds between progress writes


def job_path(key):
    if not key or "/" in key or key.startswith("."):
        raise AgentError(f"bad job id: {key!r}")
    return os.path.join(JOBS, key + ".json")


def prepare(payload, wait):
    """Start the job for `payload` unless it runs or is done; wait up to `wait` seconds."""
    path = job_path(payload["id"])
    state = read_json(path)
    if (
        state is None
        or state["state"] == "failed"
        or (state["state"] == "running" and not alive(state))
        or (state["state"] == "done" and not still_ready(payload))
    ):
        state = start(payload, path)
    deadline = time.time() + wait
    while state["state"] == "running" and alive(state) and time.time() < deadline:
        time.sleep(0.05)
        state = read_json(path) or state
    if state["state"] == "running" and not alive(state):
        state = dict(state, state="failed", error="the prepare job died ({})".format(state["step"]))
    return state


def still_ready(payload):
    """A finished job's environments and weights are still there (prune may have run)."""
    for need in payload.get("needs", []):
        marker = os.path.join(runtimes.ENGINES, need["name"], runtimes.MARKER)
        if need["kind"] == "venv" and not os.path.exists(marker):
            return False
    source = payload.get("weights")
    return not source or weights.weights_ready(source["source"]) is not None


def start(payload, path):
    os.makedirs(JOBS, exist_ok=True)
    secret = payload.get("weights", {}).get("token") if payload.get("weights") else None
    spec = dict(payload)
    if secret:  # the token goes to the job's environment, never to a file
        spec["weights"] = dict(payload["weights"], token=None)
    started_at = time.time()
    write_atomic(path + ".spec", dict(spec, started_at=started_at))
    env = child_environment("job", {"HF_TOKEN": secret} if secret else None)
    job = detach("run-job", payload["id"], env)
    deadline = time.time() + 10
    while time.time() < deadline:
        state = read_json(path)
        if state is not None and state.get("started_at") == started_at:
            return state
        if job.poll() is not None:
            break
        time.sleep(0.01)
    raise AgentError("prepare job {} did not start (exit {})".format(payload["id"], job.poll()))


def run_job(key):
    path = job_path(key)
    spec = read_json(path + ".spec")
    os.unlink(path + ".spec")
    state = {
        "id": key,
        "state": "running",
        "step": "starting",
        "bytes_done": 0,
        "bytes_total": 0,
        "pid": os.getpid(),
        "start_time": start_time(os.getpid()),
        "started_at": spec["started_at"],
        "error": None,
        "ready": [],
    }
    write_atomic(path, state)
    last = [0.0]

    def report(step, done, total):
        state.update(step=step, bytes_done=done, bytes_total=total)
        if time.time() - last[0] >= REPORT_EVERY or done == total:
            last[0] = time.time()
            write_atomic(path, state)

    def pause_point(step):
        """Test hook: stop here, reported, until killed (the interrupted-build tests)."""
        if spec.get("pause_at") == step:
            state.update(step="paused at " + step)
            write_atomic(path, state)
            while True:
                signal.pause()

    try:
        for need in spec.get("needs", []):
            if need["kind"] == "venv":
                state["ready"].append(runtimes.ensure_venv(need, report, pause_point))
            else:
                state["ready"].append(runtimes.ensure_image(need, report))
        source = spec.get("weights")
        if source:
            source = dict(source, token=os.environ.get("HF_TOKEN"))
            if source["source"].startswith("hf://") and not source.get("hf_python"):
                tools = runtimes.ensure_venv(spec["hf_tools"], report, pause_point)
                source["hf_python"] = os.path.join(runtimes.ENGINES, tools["name"], "bin", "python")
            state["weights"] = weights.fetch_weights(
                source, lambda done, total: report("weights", done, total)
            )
        state.update(state="done", step="ready", finished_at=time.time())
    except AgentError as exc:
        state.update(state="failed", error=str(exc))
    except Exception as exc:  # a job must always leave a verdict behind
        state.update(state="failed", error=f"{type(exc).__name__}: {exc}")
    write_atomic(path, state)
