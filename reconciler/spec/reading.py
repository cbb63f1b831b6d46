"""Adapter: a file of the local filesystem, measured before it is read and never read past
its bound (no git here: pure modules' file readers, traces and suites, import it)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from reconciler.errors import DenvError
from reconciler.spec.bounds import too_large


class UnreadableFile(DenvError):
    """A path the loader refuses to read (the message says why); it becomes a problem."""


def open_measured(file: Path) -> tuple[int, int]:
    """An open descriptor of a regular file and its size; UnreadableFile saying why not."""
    try:
        descriptor = os.open(file, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO does not block
    except OSError as exc:
        raise UnreadableFile(f"cannot be read: {exc.strerror}") from exc
    info = os.fstat(descriptor)
    if not stat.S_ISREG(info.st_mode):
        os.close(descriptor)
        raise UnreadableFile("not a regular file: not read")
    return descriptor, info.st_size


def read_bounded(file: Path, limit: int) -> bytes:
    """A regular file's bytes, measured before it is read and never read past `limit`;
    UnreadableFile saying why not (too large, not a regular file, not readable)."""
    descriptor, size = open_measured(file)
    with os.fdopen(descriptor, "rb") as stream:
        data = b"" if size > limit else stream.read(limit + 1)  # it may grow meanwhile
    refusal = too_large(max(size, len(data)), limit)
    if refusal is not None:
        raise UnreadableFile(refusal)
    return data


def read_text(file: Path, what: str, limit: int) -> str:
    """The UTF-8 text of a file the operator names (a trace, a result, a simulator spec),
    read as a repository's files are (`read_bounded`); DenvError naming the file and `what`
    it was to be when it cannot be."""
    if not file.exists() and not file.is_symlink():
        raise DenvError(f"{file}: no such {what}")
    try:
        return read_bounded(file, limit).decode("utf-8")
    except (UnreadableFile, UnicodeDecodeError) as exc:
        raise DenvError(f"{file}: cannot read the {what}: {exc}") from exc
