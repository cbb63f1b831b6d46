"""Adapter: the `ssh` transport (fabric). The only module that imports fabric and paramiko.

One connection per host stays open across calls and is re-dialled on failure: a new
connection costs the host about 100 ms of CPU, a command on an open one a few milliseconds.
Only *connecting* is retried (tenacity, backoff with jitter), and only while the fleet's
`connect_timeout` lasts: TCP connect, SSH banner and authentication together get that long,
so a host that never answers is reported within it. A failure that dialling again cannot
mend (a refused key, a changed host key) is not retried. Once a command may have started, a
failure is reported, never blindly run again. `cause_of` (pure) names why a dial failed.
"""

from __future__ import annotations

import contextlib
import errno
import select
import shlex
import socket
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import fabric
import paramiko
from paramiko.ssh_exception import NoValidConnectionsError, SSHException
from tenacity import (
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    stop_before_delay,
    wait_random_exponential,
)

from reconciler.fleet.model.answers import ERRORS_MAX, ONE_SHOT_MAX, Refused
from reconciler.fleet.model.observed import Cause
from reconciler.fleet.transport import Completed, HostUnreachable, Stream
from reconciler.spec.fleet import Host, SshSettings, reserved_name

CONNECT_ERRORS = (
    NoValidConnectionsError,
    socket.timeout,
    TimeoutError,
    ConnectionError,
    EOFError,
    SSHException,
    OSError,
    ValueError,  # paramiko on a key file it cannot read
)
NO_ROUTE = (errno.EHOSTUNREACH, errno.ENETUNREACH)


def _chain(exc: BaseException) -> list[BaseException]:
    """The exception and those it was raised from or during, outermost first."""
    found: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in found:
        found.append(current)
        current = current.__cause__ or current.__context__
    return found


def cause_of(exc: BaseException, timeout: float) -> tuple[Cause, str]:
    """Pure: why dialling a host failed, and a short detail (`timeout`: the dial's budget)."""
    chain = _chain(exc)
    text = str(exc).strip() or type(exc).__name__
    if isinstance(exc, paramiko.BadHostKeyException):
        return Cause.HOST_KEY_CHANGED, f"it offers another {exc.key.get_name()} key"
    if isinstance(exc, paramiko.AuthenticationException):
        if "timeout" in text.lower():
            return Cause.TIMED_OUT, f"no answer to authentication within {timeout:g}s"
        return Cause.AUTH_FAILED, text
    if isinstance(exc, NoValidConnectionsError):
        codes = {error.errno for error in exc.errors.values()}
        if codes & set(NO_ROUTE):
            return Cause.NO_ROUTE, "no route to the address"
        return Cause.REFUSED, "nothing listens on the port"
    if isinstance(exc, socket.gaierror):
        return Cause.UNKNOWN_NAME, "the name does not resolve"
    if isinstance(exc, ConnectionRefusedError):
        return Cause.REFUSED, "nothing listens on the port"
    if isinstance(exc, TimeoutError):
        return Cause.TIMED_OUT, f"no TCP connection within {timeout:g}s"
    if isinstance(exc, OSError) and exc.errno in NO_ROUTE:
        return Cause.NO_ROUTE, "no route to the address"
    if isinstance(exc, SSHException):
        if "not found in known_hosts" in text:
            return Cause.HOST_KEY_UNKNOWN, "no key for it in known_hosts"
        if "No authentication methods" in text:
            return Cause.AUTH_FAILED, "no key to offer"
        if text.startswith("Error reading SSH protocol banner"):
            if any(isinstance(e, EOFError | ConnectionError) for e in chain[1:]):
                return Cause.CLOSED, "the host closed the connection before its SSH banner"
            return Cause.TIMED_OUT, f"no SSH banner within {timeout:g}s"
        if text in ("No existing session", "Negotiation timed out."):
            return Cause.TIMED_OUT, f"no SSH handshake within {timeout:g}s"
        return Cause.FAILED, text
    if isinstance(exc, EOFError | ConnectionError):
        return Cause.CLOSED, "the host closed the connection during the handshake"
    if isinstance(exc, OSError):
        return Cause.FAILED, exc.strerror or text
    return Cause.FAILED, f"{type(exc).__name__}: {text}"


class SshTransport:
    def __init__(
        self,
        host: Host,
        settings: SshSettings,
        warn: Callable[[str], None] = lambda _message: None,
        connect_attempts: int = 3,
        fleet: str = "",
    ) -> None:
        self.host = host.name
        self.address = host.address or host.name
        self.port = host.port or settings.port
        self.settings = settings
        self.warn = warn
        self.connect_attempts = connect_attempts
        self.fleet = fleet
        self._connection: fabric.Connection | None = None
        self._dialling = threading.Lock()  # actions on one host run at once: one dials

    def _dial(self, timeout: float) -> fabric.Connection:
        key = self.settings.key_file
        keys = {"key_filename": str(Path(key).expanduser())} if key else {}
        connection = fabric.Connection(
            self.address,
            user=self.settings.user,
            port=self.port,
            connect_timeout=timeout,
            connect_kwargs={
                **keys,
                "look_for_keys": key is None,
                "allow_agent": key is None,
                "banner_timeout": timeout,
                "auth_timeout": timeout,
            },
        )
        client = connection.client
        if self.settings.check_host_keys:
            path = Path(self._known_hosts).expanduser()
            if path.exists():
                client.load_host_keys(str(path))
            client.set_missing_host_key_policy(paramiko.RejectPolicy())
        else:
            self.warn(
                f"{self.host}: host key not checked (check_host_keys: false in the "
                "fleet file; for test hosts only)"
            )
            client.set_missing_host_key_policy(paramiko.AutoAddPolicy())
        try:
            connection.open()
        except BaseException:
            client.close()  # no half-open transport (and its thread) left behind
            raise
        return connection

    @property
    def _known_hosts(self) -> str:
        return self.settings.known_hosts or "~/.ssh/known_hosts"

    def _unreached(self, cause: Cause, detail: str) -> HostUnreachable:
        """One line: the host, where it was dialled, the cause and what to do."""
        where = f"{self.address}:{self.port}"
        if cause == Cause.EXAMPLE_HOST:
            file = f"fleets/{self.fleet}.yaml" if self.fleet else "its fleet file"
            detail = f"a name reserved for documentation; replace it in {file}"
        elif cause == Cause.AUTH_FAILED:
            key = self.settings.key_file or "your default keys and ssh agent"
            detail = f"user {self.settings.user}, key {key}: {detail}"
        elif cause == Cause.HOST_KEY_CHANGED:
            name = self.address if self.port == 22 else f"[{self.address}]:{self.port}"
            detail += (
                f" than {self._known_hosts} holds; if the host was reinstalled, check the new "
                f"key, then: ssh-keygen -R '{name}'"
            )
        elif cause == Cause.HOST_KEY_UNKNOWN:
            detail = (
                f"{self._known_hosts} has no key for it; check its key, then: "
                f"ssh-keyscan -p {self.port} {self.address} >> {self._known_hosts}"
            )
        return HostUnreachable(f"{self.host} ({where}) not reached: {cause} — {detail}", cause)

    def _connected(self) -> fabric.Connection:
        with self._dialling:
            return self._connect()

    def _connect(self) -> fabric.Connection:
        if self._connection is not None and self._connection.is_connected:
            return self._connection
        if reserved_name(self.address):
            raise self._unreached(Cause.EXAMPLE_HOST, "")
        budget = self.settings.connect_timeout
        deadline = time.monotonic() + budget

        def transient(exc: BaseException) -> bool:
            return isinstance(exc, CONNECT_ERRORS) and cause_of(exc, budget)[0].retryable

        attempts = Retrying(
            retry=retry_if_exception(transient),
            stop=stop_after_attempt(self.connect_attempts) | stop_before_delay(budget),
            wait=wait_random_exponential(multiplier=0.2, max=2.0),
            reraise=True,
        )
        try:
            for attempt in attempts:
                with attempt:  # TCP, banner and authentication share what is left
                    self._connection = self._dial(max(deadline - time.monotonic(), 0.1))
        except CONNECT_ERRORS as exc:
            raise self._unreached(*cause_of(exc, budget)) from exc
        assert self._connection is not None
        return self._connection

    def run(
        self, argv: Sequence[str], stdin: bytes | None = None, timeout: float = 60.0
    ) -> Completed:
        connection = self._connected()
        command = shlex.join(argv)  # every element one argument for the remote shell
        try:
            return self._exec(connection, command, stdin, timeout)
        except TimeoutError as exc:
            self.close()
            message = f"{self.host}: no answer in {timeout:g}s"
            raise HostUnreachable(message, Cause.TIMED_OUT) from exc
        except Refused as exc:
            self.close()  # what it still sends is dropped with the connection
            message = f"{self.host}: unreachable: a command's answer: {exc}"
            raise HostUnreachable(message, Cause.BAD_ANSWER) from None
        except CONNECT_ERRORS as exc:
            self.close()  # the next call dials again; this one may have run: not retried
            raise HostUnreachable(
                f"{self.host}: connection lost during a command: {exc or type(exc).__name__}",
                Cause.CLOSED,
            ) from exc

    def open_stream(self, argv: Sequence[str]) -> Stream:
        """A channel of the kept connection running argv, left open: the resident agent."""
        connection = self._connected()
        try:
            transport = connection.client.get_transport()
            if transport is None or not transport.is_active():
                raise SSHException("not connected")
            channel = transport.open_session(timeout=self.settings.connect_timeout)
            channel.settimeout(self.settings.connect_timeout)  # a send to a hung host ends
            channel.exec_command(shlex.join(argv))
        except CONNECT_ERRORS as exc:
            self.close()
            raise HostUnreachable(
                f"{self.host}: cannot start the agent: {exc or type(exc).__name__}", Cause.CLOSED
            ) from exc
        return SshStream(channel, self.host)

    def _exec(
        self, connection: fabric.Connection, command: str, stdin: bytes | None, timeout: float
    ) -> Completed:
        transport = connection.client.get_transport()
        if transport is None or not transport.is_active():
            raise SSHException("not connected")
        channel = transport.open_session(timeout=self.settings.connect_timeout)
        deadline = time.monotonic() + timeout
        try:
            channel.exec_command(command)
            if stdin:
                channel.sendall(stdin)
            channel.shutdown_write()
            out, err = bytearray(), bytearray()
            while True:
                if channel.recv_ready():
                    out += channel.recv(65536)
                    if len(out) > ONE_SHOT_MAX:  # a host's answer is bounded, not its will
                        raise Refused(f"output over {ONE_SHOT_MAX // (1024 * 1024)} MiB")
                elif channel.recv_stderr_ready():
                    err += channel.recv_stderr(65536)
                    del err[:-ERRORS_MAX]  # its last lines say why it failed
                elif channel.exit_status_ready() and channel.eof_received:
                    break  # sshd may send the exit status before the last output: wait for EOF
                elif channel.closed or not transport.is_active():
                    raise SSHException("the connection closed before the command ended")
                elif time.monotonic() > deadline:
                    raise TimeoutError(command)
                else:
                    select.select([channel], [], [], 0.05)
            code = channel.recv_exit_status()
        finally:
            channel.close()
        return Completed(code, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"))

    def close(self) -> None:
        if self._connection is not None:
            try:
                self._connection.close()
            finally:
                self._connection = None


class SshStream:
    def __init__(self, channel: paramiko.Channel, host: str) -> None:
        self.channel = channel
        self.host = host

    def send(self, data: bytes) -> None:
        try:
            self.channel.sendall(data)
        except (OSError, SSHException, EOFError) as exc:  # socket.timeout is an OSError
            raise HostUnreachable(
                f"{self.host}: the agent's channel is gone: {exc or type(exc).__name__}",
                Cause.CLOSED,
            ) from exc

    def read(self) -> bytes:
        while True:
            try:
                return bytes(self.channel.recv(65536))  # b"" once closed, by either side
            except TimeoutError:
                if self.channel.closed:
                    return b""
            except (OSError, SSHException, EOFError):
                return b""

    def close(self) -> None:
        """Closes the channel: sshd closes the agent's stdin, and it exits once its calls end."""
        with contextlib.suppress(OSError, SSHException, EOFError):
            self.channel.close()
