"""Adapter: making runtimes and weights ready on hosts before any running replica is touched.

Each host gets one prepare job (the agent runs it detached and reports progress); the bot
polls every host's job until all are done, at most `fleet.weights.parallel` hosts at a time,
so a fleet does not saturate its uplink or the Hub. A job that fails stops nothing: the
caller decides, before it stops a single replica.

Following can be stopped (SIGTERM to the bot): every poll returns within `POLL_WAIT`, so the
bot stops following within seconds; the jobs go on on their hosts, detached, and the next
`prepare` of the same payload joins its job (a half-built runtime or half-fetched weights is
never marked ready, see the agent's runtimes and weights).
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from reconciler.engines.runtime import Need, venv_name
from reconciler.errors import DenvError
from reconciler.fleet.model.answers import JobAnswer
from reconciler.fleet.threads import run_all
from reconciler.spec.fleet import Fleet

HF_TOOLS = Need(
    kind="venv",
    name=venv_name("huggingface_hub", "2.4.0"),
    packages=("huggingface_hub==2.4.0",),
)
JobState = JobAnswer  # what a prepare job says of itself
POLL_WAIT = 2.0  # seconds the agent waits on the job before answering (long polling)


class PrepareFailed(DenvError):
    """A host could not make a runtime or weights ready; nothing was stopped."""


def weights_request(
    fleet: Fleet, source: str | None, *, secrets: Collection[str] | None
) -> dict[str, Any] | None:
    """What the agent needs to fetch `source`; the token is read from the bot's environment
    variable the fleet names and goes to the agent on stdin only. `secrets`: the variables
    this request may read (a pull request's trial: its PR policy's, none by default); None:
    any the fleet names (the fleet's own releases and the operator's runs); every caller says
    which. The fleet's weights roots go along: the agent refuses a file:// or s3:// source
    outside every one of them."""
    if source is None:
        return None
    name = fleet.weights.token_env
    allowed = name is not None and (secrets is None or name in secrets)
    token = os.environ.get(name) if allowed and name is not None else None
    return {
        "source": source,
        "host": None,
        "token": token,
        "s3_command": fleet.weights.s3_command,
        "roots": list(fleet.weights.roots),
    }


def prepare_payload(
    needs: Sequence[Need],
    weights: Mapping[str, Any] | None,
    host: str,
    pause_at: str | None = None,
) -> dict[str, Any]:
    """The agent's `prepare` input; its id is a digest of everything but the token, so the
    same request joins the job that already runs."""
    unique = sorted({n.name: n for n in needs}.values(), key=lambda n: n.name)
    payload: dict[str, Any] = {
        "needs": [n.model_dump(mode="json") for n in unique],
        "hf_tools": HF_TOOLS.model_dump(mode="json"),
    }
    if weights is not None:
        payload["weights"] = {**weights, "host": host}
    if pause_at is not None:
        payload["pause_at"] = pause_at  # test hook: the job stops there until killed
    public = {**payload, "weights": {**weights, "token": None}} if weights else payload
    digest = hashlib.sha256(json.dumps(public, sort_keys=True).encode()).hexdigest()[:16]
    return {"id": f"prepare-{digest}", **payload}


# One host's prepare job as its fleet's driver reaches it: (payload, wait) -> the job's state.
Ask = Callable[[Mapping[str, Any], float], Any]


def follow(
    host: str,
    ask: Ask,
    payload: Mapping[str, Any],
    progress: Callable[[JobState], None],
    timeout: float,
    stopping: Callable[[], bool] = lambda: False,
) -> JobState | None:
    """Poll one host's job until it is done; raise when it fails or takes too long. None
    when `stopping` says stop first: the job goes on on its host."""
    deadline = time.monotonic() + timeout
    while not stopping():
        state = JobState.model_validate(ask(payload, POLL_WAIT))
        progress(state)
        if state.state == "done":
            return state
        if state.state == "failed":
            raise PrepareFailed(f"{host}: prepare failed: {state.error}")
        if time.monotonic() > deadline:
            raise PrepareFailed(f"{host}: prepare still {state.step} after {timeout:g}s")
    return None


def prepare_hosts(
    asks: Mapping[str, tuple[str, Ask]],
    payloads: Mapping[str, Mapping[str, Any]],
    parallel: int,
    progress: Callable[[str, JobState], None] = lambda host, state: None,
    timeout: float = 6 * 3600,
    stopping: Callable[[], bool] = lambda: False,
) -> tuple[dict[str, JobState], dict[str, str]]:
    """Every host's job followed to the end, `parallel` at a time: (done, errors by host).
    A host in neither was not followed to the end: `stopping` said stop, or the caller was
    interrupted (Ctrl-C, or SIGTERM turned into it); no host is waited on longer than one
    poll after that, and the hosts not yet asked are not asked."""
    done: dict[str, JobState] = {}
    errors: dict[str, str] = {}
    left = threading.Event()  # the caller is gone: stop following

    def stop() -> bool:
        return left.is_set() or stopping()

    def one(host: str) -> None:
        try:
            name, ask = asks[host]
            found = follow(name, ask, payloads[host], lambda s: progress(host, s), timeout, stop)
        except DenvError as exc:
            errors[host] = str(exc)
            return
        if found is not None:
            done[host] = found

    run_all(one, sorted(payloads), parallel, stop=left.set)
    return done, errors
