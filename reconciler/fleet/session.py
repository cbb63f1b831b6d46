"""Adapter: one resident agent's session — requests out as JSON lines, answers matched to
them by `id` by a reader thread, so calls from many threads share the one channel.

The host is not trusted: the reader takes at most ANSWER_LINE_MAX bytes a line, buffered in
pieces (linear in the answer's size), and decodes each line in one place (answers.decode).
A line it must refuse (too long, nested too deep, not an answer) ends the session: every
call waiting on it fails at once with the reason, and the next call opens a new one. The
reader itself never dies of what the host sends."""

from __future__ import annotations

import itertools
import json
import threading
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from pydantic import ValidationError

from reconciler.fleet.model.answers import ANSWER_LINE_MAX, Envelope, Refused, decode, why
from reconciler.fleet.model.observed import Cause
from reconciler.fleet.transport import HostUnreachable, Stream


class AgentGone(HostUnreachable):
    """The resident agent's session ended (agent killed, channel cut) before answering."""


class BadAnswer(HostUnreachable):
    """The host's agent answered something the bot refuses; nothing of it was used."""

    def __init__(self, host: str, what: str, reason: str) -> None:
        super().__init__(f"{host}: unreachable: {what}: {reason}", Cause.BAD_ANSWER)


class Lines:
    """Whole lines out of a byte stream, at most `limit` bytes each; Refused past it."""

    def __init__(self, limit: int = ANSWER_LINE_MAX) -> None:
        self.limit = limit
        self._parts: list[bytes] = []  # the line so far, in the pieces it came in
        self._size = 0

    def feed(self, chunk: bytes) -> list[bytes]:
        lines = []
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            self._add(chunk[start:end])
            lines.append(b"".join(self._parts))
            self._parts, self._size = [], 0
            start = end + 1
        self._add(chunk[start:])
        return lines

    def _add(self, piece: bytes) -> None:
        self._size += len(piece)
        if self._size > self.limit:
            raise Refused(f"an answer line over {self.limit // (1024 * 1024)} MiB")
        if piece:
            self._parts.append(piece)


class AgentSession:
    def __init__(self, stream: Stream, host: str, digest: str) -> None:
        self.stream = stream
        self.host = host
        self.digest = digest  # the agent this session was opened for
        self.dead = False
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._pending: dict[int, Future[Envelope]] = {}
        self._hello: Future[Any] = Future()
        threading.Thread(target=self._read, name=f"agent-{host}", daemon=True).start()

    def _read(self) -> None:
        lines = Lines()
        try:
            while chunk := self.stream.read():
                for line in lines.feed(chunk):
                    self._dispatch(line)
        except Refused as exc:
            self._refuse(str(exc))
            return
        except Exception as exc:  # whatever the host sent, the calls hear of it
            self._refuse(f"{type(exc).__name__}")
            return
        self._end(AgentGone(f"{self.host}: the agent's channel closed", Cause.CLOSED))

    def _refuse(self, reason: str) -> None:
        self.stream.close()
        self._end(BadAnswer(self.host, "its agent's channel", reason))

    def _dispatch(self, line: bytes) -> None:
        if not self._hello.done():
            try:
                message = decode(line)
            except Refused:
                if len(line) > 4096:
                    raise
                return  # not the agent's: a shell's noise before it started
            if isinstance(message, dict):
                self._hello.set_result(message)
            return
        try:
            answer = Envelope.model_validate(decode(line))
        except ValidationError as exc:
            raise Refused(f"not an answer ({why(exc)})") from None
        with self._lock:
            future = self._pending.pop(answer.id, None) if answer.id is not None else None
        if future is not None:
            future.set_result(answer)

    def _end(self, error: HostUnreachable) -> None:
        with self._lock:
            self.dead = True
            waiting: list[Future[Any]] = [*self._pending.values(), self._hello]
            self._pending.clear()
        for future in waiting:
            if not future.done():
                future.set_exception(error)

    def hello(self, timeout: float) -> Any:
        try:
            return self._hello.result(timeout)
        except FutureTimeout:
            self.close()
            raise HostUnreachable(
                f"{self.host}: the agent did not start in {timeout:g}s", Cause.TIMED_OUT
            ) from None

    def call(self, verb: str, args: list[str], payload: Any, timeout: float) -> Envelope:
        with self._lock:
            if self.dead:
                raise AgentGone(f"{self.host}: the agent's channel closed", Cause.CLOSED)
            number = next(self._ids)
            future: Future[Envelope] = Future()
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
