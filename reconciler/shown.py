"""Pure logic: text from hosts, engines and files, made safe to show on a terminal.

A host's error, an engine's log line, a unit's state or a file name is shown, never
interpreted: `shown(text)` drops every escape sequence a terminal would act on (CSI such as
colours and cursor moves, OSC such as OSC 52 that writes the clipboard or OSC 8 links, DCS,
SOS, PM and APC strings, in their 7-bit and 8-bit forms) and every other control character
(C0 but tab and newline, DEL, C1) and the bidirectional overrides and isolates. The CLI
applies it to everything it writes (reconciler/cli/terminal.py); what it removes cannot be
asked for back.
"""

from __future__ import annotations

import re

# A string command (OSC, DCS, SOS, PM, APC) runs to BEL or ST (ESC \ or 0x9c), or, left
# open, to the next ESC or the end of the text: a terminal would swallow it as its payload.
_STRING = r"(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x9c\x1b]*(?:\x07|\x9c|\x1b\\|(?=\x1b)|\Z)"
# CSI: parameters, intermediates and a final byte; a sequence cut short goes as far as it got.
_CSI = r"(?:\x1b\[|\x9b)[\x30-\x3f]*[\x20-\x2f]*[\x40-\x7e]?"
# Any other escape: intermediates and a final byte (ESC c resets the terminal, ESC ( B …).
_ESCAPE = r"\x1b[\x20-\x2f]*[\x30-\x7e]?"
# Bidirectional overrides and isolates reorder what follows them on screen (a log line that
# reads as something else, as in "Trojan Source"); the implicit marks (LRM, RLM) cannot.
_BIDI = "\u202a-\u202e\u2066-\u2069"
_CONTROL = r"[\x00-\x08\x0b-\x1f\x7f-\x9f" + _BIDI + "]"
_NOT_SHOWN = re.compile("|".join((_STRING, _CSI, _ESCAPE, _CONTROL)))
_JSON_RAW = re.compile(r"[\x7f-\x9f\u2028\u2029" + _BIDI + "]")


def shown(text: str) -> str:
    """`text` without escape sequences and control characters; tabs and newlines stay."""
    return _NOT_SHOWN.sub("", text)


def json_escaped(document: str) -> str:
    """A JSON document with DEL, C1, bidirectional controls and the line separators written
    as `\\uXXXX`.

    JSON escapes only C0 inside strings; these are left raw by serializers that do not
    escape all non-ASCII, and a terminal may act on a C1 byte (0x9b starts a CSI). They can
    only occur inside strings, where the escape keeps the value as it was.
    """
    return _JSON_RAW.sub(lambda found: f"\\u{ord(found[0]):04x}", document)
