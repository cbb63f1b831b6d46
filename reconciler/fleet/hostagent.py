"""Adapter: the bot's side of the host agent — sends the agent once (cached on the host by
content hash), calls its verbs over any transport, and turns answers into models.

Two ways to call it. One-shot (`resident=False`, `denv fleet probe` from a laptop): every call
starts the agent, about 60 ms of the host's CPU. Resident (the bot's drivers): the agent's
`serve` stays running on the kept channel, and a call is one JSON line each way, requests
told apart by `id`. When the channel opens, the agent says hello with its file's digest; one
that is not this denv's (an older agent, a damaged file) is replaced and started again, as is a
session of an agent this process no longer ships. A session that dies (the agent killed, the
channel cut) is reopened by the next call, and a call it cut off is sent once more on the new
one: every verb is idempotent (a launch by unit name). A call that gets no answer by its
deadline closes the connection and is reported; it is not repeated.

The agent's own word on its digest is never what is trusted: before every start, the shell
line that starts it checks the file against the full sha256 this denv computed, with the
host's `sha256sum`, not the agent's code; a file that differs is treated as missing and
installed again (docs/hosts.md)."""

from __future__ import annotations

import functools
import hashlib
import io
import itertools
import json
import threading
import zipfile
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import Any

from reconciler.errors import DenvError
from reconciler.fleet.model.observed import Cause, HostObservation, UnitRecord
from reconciler.fleet.transport import HostUnreachable, Stream, Transport

_MISSING = 97  # the wrapper's exit code when the agent is not cached on the host yet
# Seconds the resident agent gets to say hello: a Python start on a busy host, not a call, so
# not the call's deadline (a host that hangs is caught by the connect and call deadlines).
START_TIMEOUT = 30.0
DEADLINE = 60.0  # a call's seconds beyond its own wait, where the fleet file sets none
_HOME = '"${DENV_HOME:-$HOME/.denv}/agent"'


class AgentFailed(DenvError):
    """The agent ran and refused, or answered something that is not its JSON."""


@functools.cache
def agent_source() -> tuple[bytes, str]:
    """The agent as a zip application (reconciler/fleet/host/*.py) and its content hash; the
    zip is built byte for byte the same from the same sources (fixed times, sorted names)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted((Path(__file__).parent / "host").glob("*.py")):
            info = zipfile.ZipInfo(path.name, date_time=(2020, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, path.read_bytes())
    source = buffer.getvalue()
    return source, hashlib.sha256(source).hexdigest()[:16]


class AgentGone(HostUnreachable):
    """The resident agent's session ended (agent killed, channel cut) before answering."""


class AgentSession:
    """One resident agent on one host: requests out as JSON lines, answers matched by `id`
    by a reader thread, so calls from many threads share the one channel."""

    def __init__(self, stream: Stream, host: str, digest: str) -> None:
        self.stream = stream
        self.host = host
        self.digest = digest  # the agent this session was opened for
        self.dead = False
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._pending: dict[int, Future[dict[str, Any]]] = {}
        self._hello: Future[dict[str, Any]] = Future()
        threading.Thread(target=self._read, name=f"agent-{host}", daemon=True).start()

    def _read(self) -> None:
        buffer = b""
        while chunk := self.stream.read():
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                self._dispatch(line)
        self._end(AgentGone(f"{self.host}: the agent's channel closed", Cause.CLOSED))

    def _dispatch(self, line: bytes) -> None:
        try:
            message = json.loads(line)
        except ValueError:
            return  # not the agent's (a shell's noise before it started)
        if not isinstance(message, dict):
            return
        if not self._hello.done():
            self._hello.set_result(message)
            return
        with self._lock:
            future = self._pending.pop(message.get("id"), None)  # type: ignore[arg-type]
        if future is not None:
            future.set_result(message)

    def _end(self, error: HostUnreachable) -> None:
        with self._lock:
            self.dead = True
            waiting = [*self._pending.values(), self._hello]
            self._pending.clear()
        for future in waiting:
            if not future.done():
                future.set_exception(error)

    def hello(self, timeout: float) -> dict[str, Any]:
        try:
            return self._hello.result(timeout)
        except FutureTimeout:
            self.close()
            raise HostUnreachable(
                f"{self.host}: the agent did not start in {timeout:g}s", Cause.TIMED_OUT
            ) from None

    def call(self, verb: str, args: list[str], payload: Any, timeout: float) -> dict[str, Any]:
        with self._lock:
            if self.dead:
                raise AgentGone(f"{self.host}: the agent's channel closed", Cause.CLOSED)
            number = next(self._ids)
            future: Future[dict[str, Any]] = Future()
            self._pending[number] = future
        request = {"id": number, "verb": verb, "args": args, "payload": payload}
        try:
            self.stream.send(json.dumps(request).encode() + b"\n")
        except HostUnreachable as exc:
            self._end(AgentGone(str(exc), Cause.CLOSED))
        try:
            return future.result(timeout)
        except FutureTimeout:
            with self._lock:
                self._pending.pop(number, None)
            raise HostUnreachable(
                f"{self.host}: no answer to {verb} in {timeout:g}s", Cause.TIMED_OUT
            ) from None

    def close(self) -> None:
        self.stream.close()
        self._end(AgentGone(f"{self.host}: the agent's session was closed", Cause.CLOSED))


class AgentClient:
    def __init__(
        self,
        transport: Transport,
        python: str = "python3",
        resident: bool = False,
        deadline: float = DEADLINE,
    ) -> None:
        self.transport = transport
        self.python = python
        self.resident = resident
        self.deadline = deadline  # a call's default timeout: seconds beyond its own wait
        self._session: AgentSession | None = None
        self._opening = threading.Lock()

    def call(self, verb: str, *args: str, payload: Any = None, timeout: float | None = None) -> Any:
        timeout = self.deadline if timeout is None else timeout
        answer = self._resident(verb, list(args), payload, timeout) if self.resident else None
        if answer is None:
            answer = self._once(verb, list(args), payload, timeout)
        if not answer.get("ok"):
            raise AgentFailed(f"{self.transport.host}: {answer.get('error')}")
        return answer.get("result")

    def _wrapper(self, source: bytes, digest: str, missing: str) -> str:
        """The shell line that runs the cached agent, or does `missing` when it is not there
        or its content is not the one this denv ships (checked by `sha256sum`, before the
        agent's code runs: a replaced file cannot vouch for itself)."""
        line = f'printf "%s  %s\\n" {hashlib.sha256(source).hexdigest()} "$a"'
        # coreutils' sha256sum, or where there is none (BSD, macOS) Perl's shasum
        check = f"{{ {line} | sha256sum -c --status || {line} | shasum -a 256 -c -s; }} 2>/dev/null"
        return f'a={_HOME}/{digest}.pyz; {check} || {{ {missing}; }}; exec "$0" "$a" "$@"'

    def _once(self, verb: str, args: list[str], payload: Any, timeout: float) -> dict[str, Any]:
        source, digest = agent_source()
        argv = [
            "sh",
            "-c",
            self._wrapper(source, digest, f"exit {_MISSING}"),
            self.python,
            verb,
            *args,
        ]
        stdin = json.dumps(payload).encode() if payload is not None else None
        done = self.transport.run(argv, stdin=stdin, timeout=timeout)
        if done.exit_code == _MISSING:
            self._install(source, digest, timeout)
            done = self.transport.run(argv, stdin=stdin, timeout=timeout)
        lines = done.stdout.strip().splitlines()
        try:
            answer = json.loads(lines[-1]) if lines else None
        except ValueError:
            answer = None
        if not isinstance(answer, dict):
            detail = (done.stderr.strip() or done.stdout.strip() or "no output")[-500:]
            raise AgentFailed(
                f"{self.transport.host}: agent {verb} failed (exit {done.exit_code}): {detail}"
            )
        return answer

    # --- resident ------------------------------------------------------------------------

    def _resident(
        self, verb: str, args: list[str], payload: Any, timeout: float
    ) -> dict[str, Any] | None:
        """The answer through the resident agent; None when it cannot start here (then the
        call goes one-shot, whose errors say why)."""
        for attempt in range(2):
            session = self._current(timeout)
            if session is None:
                return None
            try:
                return session.call(verb, args, payload, timeout)
            except AgentGone:
                self._drop(session)
                if attempt:
                    raise
            except HostUnreachable:  # no answer by the deadline: the host hangs
                self._drop(session)
                self.transport.close()
                raise
        raise AssertionError("unreachable")

    def _current(self, timeout: float) -> AgentSession | None:
        """The open session, opened (or replaced, for another agent) under a lock."""
        with self._opening:
            source, digest = agent_source()
            session = self._session
            if session is not None and not session.dead and session.digest == digest:
                return session
            if session is not None:
                self._drop(session)  # dead, or of an agent this denv no longer ships
            for attempt in range(2):
                serve = self._wrapper(source, digest, "echo '{\"missing\": true}'; exit 0")
                stream = self.transport.open_stream(["sh", "-c", serve, self.python, "serve"])
                session = AgentSession(stream, self.transport.host, digest)
                try:
                    hello = session.hello(max(timeout, START_TIMEOUT))
                except AgentGone:
                    return None  # it exited before saying hello: one-shot shows why
                found = (hello.get("hello") or {}).get("digest")
                if found == digest:
                    self._session = session
                    return session
                session.close()
                if attempt or not (hello.get("missing") or found or "ok" in hello):
                    raise AgentFailed(
                        f"{self.transport.host}: the agent at {_HOME}/{digest}.pyz says "
                        f"{json.dumps(hello)[:200]}, not digest {digest}"
                    )
                self._install(source, digest, max(timeout, START_TIMEOUT))  # absent, older, damaged
            return None

    def _drop(self, session: AgentSession) -> None:
        session.close()
        if self._session is session:
            self._session = None

    def close(self) -> None:
        """Close the resident session (the agent exits once its calls end)."""
        with self._opening:
            if self._session is not None:
                self._drop(self._session)

    def _install(self, source: bytes, digest: str, timeout: float) -> None:
        put = (
            f'd={_HOME}; mkdir -p "$d" && cat > "$d/.tmp-{digest}-$$" && '
            f'mv "$d/.tmp-{digest}-$$" "$d/{digest}.pyz"'
        )
        done = self.transport.run(["sh", "-c", put], stdin=source, timeout=timeout)
        if done.exit_code != 0:
            raise AgentFailed(
                f"{self.transport.host}: cannot install the agent: {done.stderr.strip()[-300:]}"
            )

    def probe(self, simulated: dict[str, Any] | None = None) -> HostObservation:
        args = ("--simulated", json.dumps(simulated)) if simulated is not None else ()
        return HostObservation.model_validate(self.call("probe", *args))

    def prepare(self, payload: Any, wait: float) -> Any:
        """Start or follow the host's prepare job; its state after up to `wait` seconds."""
        timeout = wait + self.deadline
        return self.call("prepare", "--wait", f"{wait:g}", payload=payload, timeout=timeout)

    def units(self) -> list[UnitRecord]:
        return [UnitRecord.model_validate(u) for u in self.call("units")["units"]]

    def launch(self, unit: dict[str, Any]) -> UnitRecord:
        return UnitRecord.model_validate(self.call("launch", payload=unit))

    def stop(self, unit_id: str, grace: float = 10.0) -> dict[str, Any]:
        result: dict[str, Any] = self.call(
            "stop", unit_id, "--grace", f"{grace:g}", timeout=grace + self.deadline
        )
        return result

    def logs(self, unit_id: str, tail: int = 100) -> dict[str, Any]:
        result: dict[str, Any] = self.call("logs", unit_id, "--tail", str(tail))
        return result

    def runtimes(self) -> dict[str, Any]:
        result: dict[str, Any] = self.call("runtimes")
        return result

    def prune(self, keep_hours: float = 24.0) -> dict[str, Any]:
        result: dict[str, Any] = self.call("prune", "--keep-hours", f"{keep_hours:g}", timeout=600)
        return result

    def lease(
        self,
        name: str,
        holder: str,
        ttl: float,
        release: bool = False,
        note: Any = None,
        peek: bool = False,
    ) -> dict[str, Any]:
        """Take or renew a lease on this host; `peek` only reads it (with its note)."""
        args = [name, "--holder", holder, "--ttl", f"{ttl:g}"]
        args += ["--release"] if release else []
        args += ["--peek"] if peek else []
        args += ["--note", json.dumps(note)] if note is not None else []
        result: dict[str, Any] = self.call("lease", *args)
        return result
