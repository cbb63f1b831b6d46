"""CLI: sys.stdout and sys.stderr through `shown` (reconciler/shown.py), from the start of
`main()`: what `print`, `typer.echo`, logging and tracebacks write is shown, never
interpreted. Rich consoles write behind it (reconciler/cli/terminal.py). Imports no rich:
`denv --help` stays light.
"""

from __future__ import annotations

import io
import sys
from typing import TextIO

from reconciler.shown import shown


class ShownStream(io.TextIOBase):
    """A text stream that writes what it is given to `raw` through `shown`."""

    def __init__(self, raw: TextIO) -> None:
        super().__init__()
        self.raw = raw
        # rich writes to this instead (its own hook for proxied streams): a ShownConsole
        # has already passed its text through `shown` and adds only its own styles.
        self.rich_proxied_file = raw

    def write(self, text: str) -> int:
        self.raw.write(shown(text))
        return len(text)

    def flush(self) -> None:
        self.raw.flush()

    def isatty(self) -> bool:
        return self.raw.isatty()

    def fileno(self) -> int:
        return self.raw.fileno()

    def writable(self) -> bool:
        return True

    @property
    def encoding(self) -> str:
        return self.raw.encoding or "utf-8"

    @encoding.setter
    def encoding(self, value: str) -> None:
        raise AttributeError("the encoding is the stream's behind")


def install() -> None:
    """sys.stdout and sys.stderr through `shown` from here on (once)."""
    if not isinstance(sys.stdout, ShownStream):
        sys.stdout = ShownStream(sys.stdout)
    if not isinstance(sys.stderr, ShownStream):
        sys.stderr = ShownStream(sys.stderr)
