"""Adapter: the `ssh` transport (fabric). The only module that imports fabric and paramiko.

One connection per host stays open across calls and is re-dialled on failure: a new
connection costs the host about 100 ms of CPU, a command on an open one a few milliseconds.
Only *connecting* is retried (tenacity, backoff with jitter): once a command may have started,
a failure is reported, never blindly run again.
"""

from __future__ import annotations

import select
import shlex
import socket
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import fabric
import paramiko
from paramiko.ssh_exception import NoValidConnectionsError, SSHException
from tenacity import (
    retry,
    retry_if_exception_type,
    stop_after_attempt,
    wait_random_exponential,
)

from reconciler.fleet.transport import Completed, HostUnreachable
from reconciler.spec.fleet import Host, SshSettings

CONNECT_ERRORS = (
    NoValidConnectionsError,
    socket.timeout,
    TimeoutError,
    ConnectionError,
    EOFError,
    SSHException,
    OSError,
)


class SshTransport:
    def __init__(
        self,
        host: Host,
        settings: SshSettings,
        warn: Callable[[str], None] = lambda _message: None,
        connect_attempts: int = 3,
    ) -> None:
        self.host = host.name
        self.address = host.address or host.name
        self.port = host.port or settings.port
        self.settings = settings
        self.warn = warn
        self.connect_attempts = connect_attempts
        self._connection: fabric.Connection | None = None

    def _dial(self) -> fabric.Connection:
        key = self.settings.key_file
        connection = fabric.Connection(
            self.address,
            user=self.settings.user,
            port=self.port,
            connect_timeout=self.settings.connect_timeout,
            connect_kwargs={
                "key_filename": str(Path(key).expanduser()) if key else None,
                "look_for_keys": key is None,
                "allow_agent": key is None,
                "banner_timeout": self.settings.connect_timeout,
                "auth_timeout": self.settings.connect_timeout,
            },
        )
        client = connection.client
        if self.settings.check_host_keys:
            known = self.settings.known_hosts or "~/.ssh/known_hosts"
            path = Path(known).expanduser()
            if path.exists():
                client.load_host_keys(str(path))
            client.set_missing_host_key_policy(paramiko.RejectPolicy())
        else:
            self.warn(
                f"{self.host}: host key not checked (check_host_keys: false in the "
                "fleet file; for test hosts only)"
            )
            client.set_missing_host_key_policy(paramiko.AutoAddPolicy())
        connection.open()
        return connection

    def _connected(self) -> fabric.Connection:
        if self._connection is not None and self._connection.is_connected:
            return self._connection
        attempt = retry(
            retry=retry_if_exception_type(CONNECT_ERRORS),
            stop=stop_after_attempt(self.connect_attempts),
            wait=wait_random_exponential(multiplier=0.2, max=2.0),
            reraise=True,
        )(self._dial)
        try:
            self._connection = attempt()
        except paramiko.BadHostKeyException as exc:
            raise HostUnreachable(
                f"{self.host}: host key does not match known_hosts ({exc.key.get_name()})"
            ) from exc
        except SSHException as exc:
            raise HostUnreachable(f"{self.host} ({self.address}:{self.port}): {exc}") from exc
        except CONNECT_ERRORS as exc:
            raise HostUnreachable(
                f"{self.host} ({self.address}:{self.port}) is "
                f"unreachable: {exc or type(exc).__name__}"
            ) from exc
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
            raise HostUnreachable(f"{self.host}: no answer in {timeout:g}s") from exc
        except CONNECT_ERRORS as exc:
            self.close()  # the next call dials again; this one may have run: not retried
            raise HostUnreachable(
                f"{self.host}: connection lost during a command: {exc or type(exc).__name__}"
            ) from exc

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
                elif channel.recv_stderr_ready():
                    err += channel.recv_stderr(65536)
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
