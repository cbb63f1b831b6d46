"""Adapter: the bot's side of the host agent — sends the agent once (cached on the host by
content hash), calls its verbs over any transport, and turns answers into models."""

from __future__ import annotations

import functools
import hashlib
import io
import json
import zipfile
from pathlib import Path
from typing import Any

from reconciler.errors import DenvError
from reconciler.fleet.model.observed import HostObservation, UnitRecord
from reconciler.fleet.transport import Transport

_MISSING = 97  # the wrapper's exit code when the agent is not cached on the host yet
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


class AgentClient:
    def __init__(self, transport: Transport, python: str = "python3") -> None:
        self.transport = transport
        self.python = python

    def call(self, verb: str, *args: str, payload: Any = None, timeout: float = 60.0) -> Any:
        source, digest = agent_source()
        run = f'a={_HOME}/{digest}.pyz; [ -f "$a" ] || exit {_MISSING}; exec "$0" "$a" "$@"'
        argv = ["sh", "-c", run, self.python, verb, *args]
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
        if not answer.get("ok"):
            raise AgentFailed(f"{self.transport.host}: {answer.get('error')}")
        return answer.get("result")

    def _install(self, source: bytes, digest: str, timeout: float) -> None:
        put = (
            f'd={_HOME}; mkdir -p "$d" && cat > "$d/.tmp-{digest}" && '
            f'mv "$d/.tmp-{digest}" "$d/{digest}.pyz"'
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
        return self.call("prepare", "--wait", f"{wait:g}", payload=payload, timeout=60)

    def units(self) -> list[UnitRecord]:
        return [UnitRecord.model_validate(u) for u in self.call("units")["units"]]

    def launch(self, unit: dict[str, Any]) -> UnitRecord:
        return UnitRecord.model_validate(self.call("launch", payload=unit))

    def stop(self, unit_id: str, grace: float = 10.0) -> dict[str, Any]:
        result: dict[str, Any] = self.call(
            "stop", unit_id, "--grace", f"{grace:g}", timeout=grace + 30
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
