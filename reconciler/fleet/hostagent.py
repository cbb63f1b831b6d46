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
installed again (docs/hosts.md).

Every answer, of every verb, resident or one-shot, is read in one place (`call`) into the
model the caller names (fleet.model.answers): one that does not fit makes the host
unreachable with the reason (BadAnswer), and nothing of it is used."""

from __future__ import annotations

import functools
import hashlib
import io
import json
import shlex
import threading
import zipfile
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from reconciler.errors import DenvError
from reconciler.fleet.model.answers import (
    Envelope,
    Hello,
    JobAnswer,
    LeaseAnswer,
    LogsAnswer,
    PruneAnswer,
    Refused,
    RepairAnswer,
    RuntimesAnswer,
    StopAnswer,
    UnitsAnswer,
    decode,
    why,
)
from reconciler.fleet.model.observed import HostObservation, UnitRecord
from reconciler.fleet.session import AgentGone, AgentSession, BadAnswer
from reconciler.fleet.transport import HostUnreachable, LocalTransport, Transport

__all__ = [
    "AgentClient",
    "AgentFailed",
    "AgentGone",
    "BadAnswer",
    "RecordUnreadable",
    "agent_source",
]
REPAIR = "`denv fleet repair FLEET`"
M = TypeVar("M", bound=BaseModel)

_MISSING = 97  # the wrapper's exit code when the agent is not cached on the host yet
# Seconds the resident agent gets to say hello: a Python start on a busy host, not a call, so
# not the call's deadline (a host that hangs is caught by the connect and call deadlines).
START_TIMEOUT = 30.0
DEADLINE = 60.0  # a call's seconds beyond its own wait, where the fleet file sets none
UNFENCED = ("lease", "repair")  # the lease's own calls, and an operator's repair
_HOME = '"${DENV_HOME:-$HOME/.denv}/agent"'


class AgentFailed(DenvError):
    """The agent ran and refused, or answered something that is not its JSON."""


class Fenced(AgentFailed):
    """The agent refused the call's lease epoch: it has seen a newer one of `fleet`, so the
    bot lost the fleet's lease since it took it (host/fences.py)."""

    def __init__(self, message: str, fleet: str) -> None:
        super().__init__(message)
        self.fleet = fleet


class HostFault(AgentFailed):
    """The host cannot write (its disk is full, a quota is reached, it is read-only): every
    call that writes there fails alike, so the bot asks it nothing more in the pass."""


class RecordUnreadable(AgentFailed):
    """The agent refused because a record it needs is there and cannot be read (a lease file,
    a unit record): what it holds is not known, until `denv fleet repair`."""

    def __init__(self, message: str, path: str) -> None:
        super().__init__(message)
        self.path = path


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


class AgentClient:
    def __init__(
        self,
        transport: Transport,
        python: str = "python3",
        resident: bool = False,
        deadline: float = DEADLINE,
        home: str | None = None,
        fleet: str | None = None,
    ) -> None:
        self.transport = transport
        self.fleet = fleet  # the fleet it serves, named in the repair command it suggests
        self.python = python
        self.home = home  # the agent's DENV_HOME on the host; None: its own default
        self.resident = resident
        self.deadline = deadline  # a call's default timeout: seconds beyond its own wait
        # "fleet:epoch" of the lease its bot holds: every call but the lease's own and a
        # repair carries it, refused by an agent that has seen a newer one (host/fences.py)
        self.fence: str | None = None
        self._session: AgentSession | None = None
        self._opening = threading.Lock()

    def call(
        self,
        verb: str,
        *args: str,
        answer: type[M],
        payload: Any = None,
        timeout: float | None = None,
    ) -> M:
        """Ask the agent `verb`; its result read into `answer` (the only way to read one).
        AgentFailed when the agent refused; BadAnswer when what it said does not fit."""
        timeout = self.deadline if timeout is None else timeout
        fence = self.fence if verb not in UNFENCED else None
        args = (*args, "--fence", fence) if fence else args
        found = self._resident(verb, list(args), payload, timeout) if self.resident else None
        if found is None:
            found = self._once(verb, list(args), payload, timeout)
        if not found.ok:
            message = f"{self.transport.host}: {(found.error or 'no reason')[:2000]}"
            if found.unreadable:
                raise RecordUnreadable(self._named(message), found.unreadable)
            if found.host_fault:
                raise HostFault(message)
            if fence and (found.error or "").startswith("fenced:"):
                raise Fenced(message, fence.rpartition(":")[0])
            raise AgentFailed(message)
        try:
            return answer.model_validate(found.result)
        except ValidationError as exc:
            raise BadAnswer(self.transport.host, f"its answer to {verb}", why(exc)) from None

    def _script(self, body: str) -> str:
        """A shell script for the host: with the fleet's agent home, DENV_HOME is set first
        (quoted), so the agent, its units and their jobs keep everything there."""
        if self.home is None:
            return body
        return f"DENV_HOME={shlex.quote(self.home)}; export DENV_HOME; {body}"

    def _wrapper(self, source: bytes, digest: str, missing: str) -> str:
        """The shell line that runs the cached agent, or does `missing` when it is not there
        or its content is not the one this denv ships (checked by `sha256sum`, before the
        agent's code runs: a replaced file cannot vouch for itself)."""
        line = f'printf "%s  %s\\n" {hashlib.sha256(source).hexdigest()} "$a"'
        # coreutils' sha256sum, or where there is none (BSD, macOS) Perl's shasum
        check = f"{{ {line} | sha256sum -c --status || {line} | shasum -a 256 -c -s; }} 2>/dev/null"
        return f'a={_HOME}/{digest}.pyz; {check} || {{ {missing}; }}; exec "$0" "$a" "$@"'

    def _once(self, verb: str, args: list[str], payload: Any, timeout: float) -> Envelope:
        source, digest = agent_source()
        argv = [
            "sh",
            "-c",
            self._script(self._wrapper(source, digest, f"exit {_MISSING}")),
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
            found = Envelope.model_validate(decode(lines[-1].encode()) if lines else None)
        except Refused as exc:
            raise BadAnswer(self.transport.host, f"its answer to {verb}", str(exc)) from None
        except ValidationError:
            detail = (done.stderr.strip() or done.stdout.strip() or "no output")[-500:]
            raise AgentFailed(
                f"{self.transport.host}: agent {verb} failed (exit {done.exit_code}): {detail}"
            ) from None
        return found

    # --- resident ------------------------------------------------------------------------

    def _resident(
        self, verb: str, args: list[str], payload: Any, timeout: float
    ) -> Envelope | None:
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
                stream = self.transport.open_stream(
                    ["sh", "-c", self._script(serve), self.python, "serve"]
                )
                session = AgentSession(stream, self.transport.host, digest)
                try:
                    said = session.hello(max(timeout, START_TIMEOUT))
                except AgentGone:
                    return None  # it exited before saying hello: one-shot shows why
                try:
                    hello = Hello.model_validate(said)
                except ValidationError as exc:
                    session.close()
                    raise BadAnswer(self.transport.host, "its agent's hello", why(exc)) from None
                found = hello.hello.digest if hello.hello is not None else None
                if found == digest:
                    self._session = session
                    return session
                session.close()
                if attempt or not (hello.missing or found or hello.ok is not None):
                    raise AgentFailed(
                        f"{self.transport.host}: the agent at {_HOME}/{digest}.pyz says "
                        f"{json.dumps(said)[:200]}, not digest {digest}"
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
        done = self.transport.run(["sh", "-c", self._script(put)], stdin=source, timeout=timeout)
        if done.exit_code != 0:
            raise AgentFailed(
                f"{self.transport.host}: cannot install the agent: {done.stderr.strip()[-300:]}"
            )

    def probe(self, simulated: dict[str, Any] | None = None) -> HostObservation:
        args = ("--simulated", json.dumps(simulated)) if simulated is not None else ()
        return self.call("probe", *args, answer=HostObservation)

    def prepare(self, payload: Any, wait: float) -> dict[str, Any]:
        """Start or follow the host's prepare job; its state after up to `wait` seconds."""
        timeout = wait + self.deadline
        state = self.call(
            "prepare", "--wait", f"{wait:g}", answer=JobAnswer, payload=payload, timeout=timeout
        )
        return state.model_dump(mode="json")

    def units(self) -> list[UnitRecord]:
        """Every unit record; RecordUnreadable when one cannot be read (what runs is not
        known: nothing is to be decided from the others alone)."""
        found = self.call("units", answer=UnitsAnswer)
        if found.unreadable:
            first, more = found.unreadable[0], len(found.unreadable) - 1
            message = f"{self.transport.host}: unit record {first.path} is unreadable ({first.why})"
            message += f" (and {more} more unit record(s))" if more else ""
            raise RecordUnreadable(self._named(message + f"; repair: {REPAIR}"), first.path)
        return list(found.units)

    def _named(self, message: str) -> str:
        """The agent's `denv fleet repair FLEET`, with the fleet's name where it is known."""
        if self.fleet is None:
            return message
        return message.replace(REPAIR, f"`denv fleet repair {shlex.quote(self.fleet)}`")

    def repair(self, grace: float = 10.0) -> RepairAnswer:
        """Mend the host's unreadable records (`denv fleet repair`)."""
        args = ("--grace", f"{grace:g}")
        return self.call("repair", *args, answer=RepairAnswer, timeout=grace + self.deadline)

    def launch(self, unit: dict[str, Any]) -> UnitRecord:
        return self.call("launch", answer=UnitRecord, payload=unit)

    def stop(self, unit_id: str, grace: float = 10.0) -> dict[str, Any]:
        args = (unit_id, "--grace", f"{grace:g}")
        stopped = self.call("stop", *args, answer=StopAnswer, timeout=grace + self.deadline)
        return stopped.model_dump(mode="json")

    def logs(self, unit_id: str, tail: int = 100) -> dict[str, Any]:
        lines = self.call("logs", unit_id, "--tail", str(tail), answer=LogsAnswer)
        return lines.model_dump(mode="json")

    def runtimes(self) -> dict[str, Any]:
        return self.call("runtimes", answer=RuntimesAnswer).model_dump(mode="json")

    def prune(self, keep_hours: float = 24.0) -> dict[str, Any]:
        args = ("--keep-hours", f"{keep_hours:g}")
        return self.call("prune", *args, answer=PruneAnswer, timeout=600).model_dump(mode="json")

    def lease(
        self,
        name: str,
        holder: str,
        ttl: float,
        release: bool = False,
        note: Any = None,
        peek: bool = False,
    ) -> LeaseAnswer:
        """Take or renew a lease on this host; `peek` only reads it (with its note). An agent on
        this machine keeps it for the machine, whatever its home: one controller per GPU."""
        args = [name, "--holder", holder, "--ttl", f"{ttl:g}"]
        args += ["--machine"] if isinstance(self.transport, LocalTransport) else []
        args += ["--release"] if release else []
        args += ["--peek"] if peek else []
        args += ["--note", json.dumps(note)] if note is not None else []
        return self.call("lease", *args, answer=LeaseAnswer)
