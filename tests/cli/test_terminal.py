"""reconciler/cli/terminal.py: the one kind of rich Console the CLI makes, and the streams
behind print() and typer.echo."""

from __future__ import annotations

import ast
import io

from rich.table import Table
from rich.text import Text

from reconciler.cli.streams import ShownStream
from reconciler.cli.terminal import ShownConsole
from tests.conftest import ROOT

HOSTILE = "x\x1b]52;c;Y3Vy\x07\x1b[2J\x9b1m[bold red]y[/] [link=http://e]z[/link]\x7f"
SHOWN = "x[bold red]y[/] [link=http://e]z[/link]"


def _console(file: io.StringIO) -> ShownConsole:
    return ShownConsole(
        file=file, width=200, force_terminal=True, color_system="truecolor", highlight=False
    )


def test_strings_tables_and_text_objects_are_shown_not_interpreted() -> None:
    out = io.StringIO()
    console = _console(out)
    console.print(HOSTILE, markup=True)  # asked for: still off
    table = Table("HOST", "ERROR", box=None)
    table.add_row("h", HOSTILE)
    console.print(table)
    console.print(Text(HOSTILE, style="bold"))
    console.rule(HOSTILE)
    written = out.getvalue()
    assert written.count(SHOWN) == 4
    assert "\x9b" not in written and "\x07" not in written and "]52;" not in written
    assert "\x1b]8;" not in written  # no link from [link=…]
    assert "\x1b[2J" not in written and "\x7f" not in written
    assert "\x1b[1m" in written  # its own styles stay


def test_the_stream_behind_print_drops_escapes_and_rich_writes_behind_it() -> None:
    raw = io.StringIO()
    stream = ShownStream(raw)  # type: ignore[arg-type]
    print(HOSTILE, file=stream)
    assert raw.getvalue() == SHOWN + "\n"
    assert stream.rich_proxied_file is raw


def test_every_console_of_the_cli_is_a_shown_console() -> None:
    """No module of the CLI makes a rich Console, a Progress with its own, or asks for
    markup: they take terminal.console() (or common.console)."""
    found = []
    for path in sorted((ROOT / "reconciler" / "cli").glob("*.py")):
        if path.name == "terminal.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                name = getattr(node.func, "id", getattr(node.func, "attr", ""))
                if name == "Console":
                    found.append(f"{path.name}:{node.lineno}: Console(…)")
                for keyword in node.keywords:
                    value = keyword.value
                    if keyword.arg == "markup" and not (
                        isinstance(value, ast.Constant) and value.value is False
                    ):
                        found.append(f"{path.name}:{node.lineno}: markup=…")
    assert found == []
