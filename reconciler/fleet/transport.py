"""Adapter: running a command on a host — the interface, and the `local` transport.

The SSH transport (fleet/ssh.py) implements the same protocol; callers never know which.
"""

from __future__ import annotations

import subprocess
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


class Transport(Protocol):
    host: str

    def run(
        self, argv: Sequence[str], stdin: bytes | None = None, timeout: float = 60.0
    ) -> Completed:
        """Run argv on the host (each element passed as one argument, never re-split)."""
        ...

    def close(self) -> None: ...


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

    def close(self) -> None:
        return None
