"""Adapter: running a command on a host — the interface, and the `local` transport.

The SSH transport (fleet/ssh.py) implements the same protocol; callers never know which.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from reconciler.errors import DenvError
from reconciler.fleet.model.observed import Cause


class HostUnreachable(DenvError):
    """The host did not answer; nothing was run. Safe to retry."""

    def __init__(self, message: str, cause: Cause = Cause.FAILED) -> None:
        super().__init__(message)
        self.cause = cause


@dataclass(frozen=True)
class Completed:
    exit_code: int
    stdout: str
    stderr: str


class Stream(Protocol):
    """A process on the host that stays, with its stdin and stdout: the resident agent."""

    def send(self, data: bytes) -> None:
        """Write to its stdin; HostUnreachable when the stream is gone."""
        ...

    def read(self) -> bytes:
        """The next bytes of its stdout, blocking; b"" once it ended or `close` was called."""
        ...

    def close(self) -> None:
        """Close its stdin (it finishes what it runs, then exits) and wake `read`."""
        ...


class Transport(Protocol):
    host: str

    def run(
        self, argv: Sequence[str], stdin: bytes | None = None, timeout: float = 60.0
    ) -> Completed:
        """Run argv on the host (each element passed as one argument, never re-split)."""
        ...

    def open_stream(self, argv: Sequence[str]) -> Stream:
        """Start argv on the host and keep it, talking over its stdin and stdout."""
        ...

    def close(self) -> None: ...


class LocalStream:
    FINISH = 30.0  # seconds a closed agent gets to finish its calls before it is killed

    def __init__(self, process: subprocess.Popen[bytes], host: str) -> None:
        self.process = process
        self.host = host
        self._closing = threading.Lock()
        self._closed = False

    def send(self, data: bytes) -> None:
        try:
            assert self.process.stdin is not None
            self.process.stdin.write(data)
            self.process.stdin.flush()
        except (OSError, ValueError) as exc:
            raise HostUnreachable(f"{self.host}: the agent is gone", Cause.CLOSED) from exc

    def read(self) -> bytes:
        """Blocks until the agent writes or exits; its stdout is closed only after it exited
        (by `_reap`), so a blocked read is never left on a closed descriptor."""
        assert self.process.stdout is not None
        try:
            return os.read(self.process.stdout.fileno(), 65536)
        except (OSError, ValueError):
            return b""

    def close(self) -> None:
        with self._closing:
            if self._closed:
                return
            self._closed = True
        if self.process.stdin is not None:
            with contextlib.suppress(OSError):
                self.process.stdin.close()
        threading.Thread(target=self._reap, daemon=True).start()

    def _reap(self) -> None:
        try:
            self.process.wait(self.FINISH)
        except subprocess.TimeoutExpired:
            self.process.kill()  # hung: what it ran is idempotent and the bot retries
            self.process.wait()


class LocalTransport:
    """Processes on this machine: the `local` fleet, and the bot's own host."""

    def __init__(self, host: str = "localhost", env: Mapping[str, str] | None = None) -> None:
        self.host = host
        self.env = dict(env) if env is not None else None

    def run(
        self, argv: Sequence[str], stdin: bytes | None = None, timeout: float = 60.0
    ) -> Completed:
        try:
            done = subprocess.run(
                list(argv),
                input=stdin,
                capture_output=True,
                timeout=timeout,
                env=self.env,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise HostUnreachable(f"{self.host}: {argv[0]} did not answer in {timeout:g}s") from exc
        except OSError as exc:
            raise HostUnreachable(f"{self.host}: cannot run {argv[0]}: {exc.strerror}") from exc
        return Completed(
            done.returncode,
            done.stdout.decode("utf-8", "replace"),
            done.stderr.decode("utf-8", "replace"),
        )

    def open_stream(self, argv: Sequence[str]) -> Stream:
        try:
            process = subprocess.Popen(
                list(argv),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env=self.env,
            )
        except OSError as exc:
            raise HostUnreachable(f"{self.host}: cannot run {argv[0]}: {exc.strerror}") from exc
        return LocalStream(process, self.host)

    def close(self) -> None:
        return None
