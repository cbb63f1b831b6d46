"""Pure logic: the bounds every reader of denv's files holds, whatever the file and the field.

A file is measured before it is read (`size_refusal`: the work tree's `stat`, git's object
header) and never read past its kind's bound; an integer is refused where it is written
(`integer_refusal`, from the YAML and JSON readers) when it has more digits than Python turns
into text: such a number has no meaning in any denv field, and anything that printed it
would fail.
"""

from __future__ import annotations

import math

# ruamel's round-trip parser reads about 200 KB/s: 64 KiB keeps the worst case well under a
# second, and the largest YAML file denv ships is a fraction of it. JSON results (results/*.json)
# are read by the same parser.
MAX_YAML_BYTES = 64 * 1024
# JSON Lines: imported results (results/*.jsonl) and parity suites (policies/parity/*.jsonl).
MAX_JSONL_BYTES = 64 * 1024 * 1024
# Python's own limit on turning an integer into text (sys.int_info.default_max_str_digits).
MAX_INT_DIGITS = 4300

_BASES = {"0x": 16, "0o": 8, "0b": 2}


def max_bytes(path: str) -> int:
    """The most bytes a denv file at `path` may hold."""
    return MAX_JSONL_BYTES if path.endswith(".jsonl") else MAX_YAML_BYTES


def size_refusal(path: str, size: int) -> str | None:
    """Why a file of `size` bytes at `path` is not read; None when it may be."""
    return too_large(size, max_bytes(path))


def too_large(size: int, limit: int) -> str | None:
    """Why `size` bytes are too many for a file of `limit` bytes at most; None when not."""
    if size <= limit:
        return None
    kind = "JSON Lines" if limit == MAX_JSONL_BYTES else "YAML"
    return f"file is {size:,} bytes; denv {kind} files are at most {limit:,} bytes"


def integer_refusal(literal: str) -> str | None:
    """Why an integer written `literal` (decimal, or YAML's 0x, 0o and 0b, with a sign and
    underscores) is refused; None when its value has at most MAX_INT_DIGITS decimal digits."""
    digits = literal.strip().lstrip("+-").replace("_", "")
    base = _BASES.get(digits[:2].lower(), 10)
    if base != 10:
        digits = digits[2:]
    # the most digits in `base` whose value still has MAX_INT_DIGITS decimal digits at most
    allowed = math.floor(MAX_INT_DIGITS / math.log10(base))
    if len(digits) <= allowed:
        return None
    return (
        f"an integer of {len(digits):,} digits; denv reads integers of at most "
        f"{MAX_INT_DIGITS:,} decimal digits"
    )
