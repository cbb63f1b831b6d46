"""A small disk of its own for a folder (a tmpfs mount, which needs root) and filling it: a
host whose disk is full, for the fault tests and the chaos benchmark."""

from __future__ import annotations

import errno
import subprocess
from pathlib import Path


def mount_small_disk(folder: Path, size: str = "1m") -> None:
    """`folder` (made if missing) on a tmpfs of `size`; `unmount` undoes it."""
    folder.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], check=True)


def unmount(folder: Path) -> None:
    """Lazily: a process may still have a file open there."""
    subprocess.run(["umount", "--lazy", str(folder)], check=False)


def fill(folder: Path) -> Path:
    """Write into `folder` until its disk is full; the file that filled it (unlink: room again)."""
    filler = folder / "filler"
    # unbuffered: a buffered file's close would flush what did not fit and raise ENOSPC
    with open(filler, "wb", buffering=0) as stream:
        try:
            while True:
                stream.write(b"\0" * 65536)
        except OSError as exc:
            if exc.errno != errno.ENOSPC:
                raise
    return filler
