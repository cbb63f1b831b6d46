"""CLI: the terminal boundary. Everything denv prints is shown, never interpreted.

Text from hosts (errors, unit states, names they report), engines (log lines, answers, error
bodies) and files reaches stdout and stderr only through `shown` (reconciler/shown.py):

- `streams.install()`, at the start of `main()`, puts a `ShownStream` in front of
  sys.stdout and sys.stderr (reconciler/cli/streams.py): `print`, `typer.echo`, logging and
  tracebacks lose their escape sequences and control characters there;
- `ShownConsole` is the only rich Console the CLI makes: markup is off (a host's `[link=…]`
  is shown as written), every string it renders and every segment it writes is passed
  through `shown`, and it writes its own colours to the stream behind the `ShownStream`.

Styles are given as `Text` and `Style` objects, never as markup in a string.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

from rich.console import Console, ConsoleOptions, JustifyMethod, OverflowMethod, RenderableType
from rich.segment import Segment
from rich.status import Status
from rich.style import Style
from rich.syntax import Syntax
from rich.text import Text

from reconciler.shown import shown


class ShownConsole(Console):
    """A rich Console for text denv does not control: no markup, no emoji codes, and
    nothing of the text's own escapes or control characters reaches the terminal."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**{**options, "markup": False, "emoji": False})

    def render_str(
        self,
        text: str,
        *,
        style: str | Style = "",
        justify: JustifyMethod | None = None,
        overflow: OverflowMethod | None = None,
        emoji: bool | None = None,
        markup: bool | None = None,
        highlight: bool | None = None,
        highlighter: Any = None,
    ) -> Text:
        # before layout, so widths are those of what is shown; markup stays off even where
        # a caller asks for it
        return super().render_str(
            shown(text),
            style=style,
            justify=justify,
            overflow=overflow,
            emoji=False,
            markup=False,
            highlight=highlight,
            highlighter=highlighter,
        )

    def render(
        self, renderable: RenderableType, options: ConsoleOptions | None = None
    ) -> Iterator[Segment]:
        # the last word: also text that came as a Text object, a table's or a bar's
        for segment in super().render(renderable, options):
            if segment.control:  # rich's own cursor moves (live bars)
                yield segment
            else:
                yield Segment(shown(segment.text), segment.style)

    def status(self, status: RenderableType, **options: Any) -> Status:
        """A spinner line; a string is shown as written, not read as markup."""
        message = Text(shown(status)) if isinstance(status, str) else status
        return super().status(message, **options)


def console(*, stderr: bool = False, width: int | None = None) -> ShownConsole:
    """The console of one command: stdout's (tables folded at 160 columns, not 80, when it
    is a pipe or a file) or stderr's (messages, spinners, progress)."""
    if width is None and not stderr and not sys.stdout.isatty():
        width = 160
    return ShownConsole(stderr=stderr, width=width)


def print_file(out: ShownConsole, text: str, lexer: str) -> None:
    """A file's text: highlighted and folded at the terminal's width on a terminal (a long
    line wraps, never cropped), byte for byte otherwise (a pipe keeps every URL whole)."""
    if out.is_terminal:
        out.print(Syntax(text, lexer, background_color="default", word_wrap=True))
    else:
        out.file.write(shown(text) if text.endswith("\n") else shown(text) + "\n")
