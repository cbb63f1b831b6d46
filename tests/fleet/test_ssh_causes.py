"""Why a dial failed, from what paramiko and the socket layer raise: one cause per failure."""

from __future__ import annotations

import errno
import socket

import paramiko
import pytest
from paramiko.ssh_exception import NoValidConnectionsError, SSHException

from reconciler.fleet.model.observed import Cause
from reconciler.fleet.ssh import cause_of


class _Key:
    """What BadHostKeyException reads of a key (paramiko builds keys only from real files)."""

    def __init__(self, name: str, data: str) -> None:
        self.name, self.data = name, data

    def get_name(self) -> str:
        return self.name

    def get_base64(self) -> str:
        return self.data


def during(outer: BaseException, inner: BaseException) -> BaseException:
    """`outer` as raised while handling `inner` (paramiko's banner errors are)."""
    outer.__context__ = inner
    return outer


BANNER = "Error reading SSH protocol banner"
CASES = [
    (
        NoValidConnectionsError({("127.0.0.1", 22): OSError(errno.ECONNREFUSED, "refused")}),
        Cause.REFUSED,
        "nothing listens on the port",
    ),
    (
        NoValidConnectionsError({("10.0.0.9", 22): OSError(errno.EHOSTUNREACH, "no route")}),
        Cause.NO_ROUTE,
        "no route to the address",
    ),
    (
        ConnectionRefusedError(errno.ECONNREFUSED, "refused"),
        Cause.REFUSED,
        "nothing listens on the port",
    ),
    (
        OSError(errno.ENETUNREACH, "Network is unreachable"),
        Cause.NO_ROUTE,
        "no route to the address",
    ),
    (
        socket.gaierror(-2, "Name or service not known"),
        Cause.UNKNOWN_NAME,
        "the name does not resolve",
    ),
    (TimeoutError("timed out"), Cause.TIMED_OUT, "no TCP connection within 5s"),
    (during(SSHException(BANNER), TimeoutError()), Cause.TIMED_OUT, "no SSH banner within 5s"),
    (SSHException(BANNER), Cause.TIMED_OUT, "no SSH banner within 5s"),
    (
        during(SSHException(BANNER), EOFError()),
        Cause.CLOSED,
        "the host closed the connection before its SSH banner",
    ),
    (
        during(SSHException(BANNER + "[Errno 104] reset"), ConnectionResetError(104, "reset")),
        Cause.CLOSED,
        "the host closed the connection before its SSH banner",
    ),
    (SSHException("No existing session"), Cause.TIMED_OUT, "no SSH handshake within 5s"),
    (SSHException("Negotiation timed out."), Cause.TIMED_OUT, "no SSH handshake within 5s"),
    (
        paramiko.AuthenticationException("Authentication failed."),
        Cause.AUTH_FAILED,
        "Authentication failed.",
    ),
    (
        paramiko.AuthenticationException("Authentication timeout."),
        Cause.TIMED_OUT,
        "no answer to authentication within 5s",
    ),
    (SSHException("No authentication methods available"), Cause.AUTH_FAILED, "no key to offer"),
    (
        paramiko.BadHostKeyException("h", _Key("ssh-ed25519", "AAAA"), _Key("ssh-ed25519", "BBBB")),
        Cause.HOST_KEY_CHANGED,
        "it offers another ssh-ed25519 key",
    ),
    (
        SSHException("Server '[127.0.0.1]:2222' not found in known_hosts"),
        Cause.HOST_KEY_UNKNOWN,
        "no key for it in known_hosts",
    ),
    (EOFError(), Cause.CLOSED, "the host closed the connection during the handshake"),
    (SSHException("Incompatible ssh server"), Cause.FAILED, "Incompatible ssh server"),
    (
        ValueError("q must be exactly 160, 224, or 256 bits long"),
        Cause.FAILED,
        "ValueError: q must be exactly 160, 224, or 256 bits long",
    ),
]


@pytest.mark.parametrize(
    ("error", "cause", "detail"), CASES, ids=[f"{c[1]}-{i}" for i, c in enumerate(CASES)]
)
def test_cause_of(error: BaseException, cause: Cause, detail: str) -> None:
    assert cause_of(error, timeout=5) == (cause, detail)


@pytest.mark.parametrize(
    ("cause", "again"),
    [
        (Cause.REFUSED, True),  # a host restarting its sshd
        (Cause.TIMED_OUT, True),  # only while the connect timeout lasts
        (Cause.NO_ROUTE, True),
        (Cause.CLOSED, True),
        (Cause.AUTH_FAILED, False),
        (Cause.HOST_KEY_CHANGED, False),
        (Cause.HOST_KEY_UNKNOWN, False),
        (Cause.UNKNOWN_NAME, False),
        (Cause.EXAMPLE_HOST, False),
        (Cause.FAILED, False),
    ],
    ids=lambda value: str(value),
)
def test_only_what_dialling_again_may_mend_is_retried(cause: Cause, again: bool) -> None:
    assert cause.retryable is again
