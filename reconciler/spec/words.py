"""Pure logic: a count with its noun, for every message and table ('1 GPU', '8 GPUs')."""

from __future__ import annotations


def counted(n: int | None, noun: str, plural: str | None = None) -> str:
    """`n` and the noun, plural unless n is 1 (`plural`: an irregular one); '…' for None."""
    many = plural or f"{noun}s"
    if n is None:
        return f"… {many}"
    return f"{n:,} {noun if n == 1 else many}"
