"""Adapter: running a command on a host — the interface, and the `local` transport.

The SSH transport (fleet/ssh.py) implements the same protocol; callers never know which.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from reconciler.errors import DenvError
from reconciler.spec.fleet import Fleet


class Cause(StrEnum):
    """Why a host was not reached: one word or two, shown beside the host's name."""

    REFUSED = "refused"  # nothing listens on the port
    TIMED_OUT = "timed out"  # no TCP connection, SSH banner or handshake within the timeout
    NO_ROUTE = "no route"  # the network says the address cannot be reached
    UNKNOWN_NAME = "unknown name"  # the name does not resolve
    AUTH_FAILED = "auth failed"  # the host refused the user and key
    HOST_KEY_CHANGED = "host key changed"  # known_hosts has another key for it
    HOST_KEY_UNKNOWN = "host key unknown"  # known_hosts has no key for it
    CLOSED = "closed"  # the host dropped the connection during the handshake
    EXAMPLE_HOST = "example host"  # a name reserved for documentation: replace it
    FAILED = "failed"  # anything else: the message says what

    @property
    def retryable(self) -> bool:
        """Whether dialling again may help (a host restarting); a refused key never changes."""
        return self in (Cause.REFUSED, Cause.TIMED_OUT, Cause.NO_ROUTE, Cause.CLOSED)


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


def host_python(fleet: Fleet) -> str:
    """The interpreter on a fleet's hosts: denv's own on this machine (a local fleet), else
    the fleet's `python`."""
    return sys.executable if fleet.transport == "local" else fleet.python
