"""Adapter: the values of parsed YAML files, kept on disk by content, so that a command that
reads the repository parses only the files that changed since one last read them.

ruamel's round-trip parser, which keeps the positions that `file:line` errors need, reads
about 200 KB/s: the repository's YAML takes it over a second, every command. An entry holds
one file's values (`parse_values`: plain dicts, lists, scalars and dates) under a key of the
file's path, its bytes and the parser itself (denv's YAML module, this one and ruamel's
version): a changed file or a changed parser misses, and the file is parsed again, so an
entry is never stale. The round-trip data, for positions and edits, is parsed again from the
text only where it is asked for (`YamlDoc.data`). Only files that parse are kept; a file
with a problem is parsed every time, to report it. One entry per path: a changed file
replaces its entry, and the folder does not grow with every edit. An entry that cannot be
read — truncated, corrupt, or holding anything but plain values — is a miss, and a folder
that cannot be written is no cache.

An entry's key names the bytes it was parsed from, not the values it holds: whoever can write
an entry decides what denv reads for that file. So the cache never holds what a pull request
may not decide (`sources.is_trusted_path`: fleets, policies): those files are parsed every
time, from the bytes of the ref they are read from. And a folder, or an entry, that another
user owns or that group or others may write is no cache (as ssh treats ~/.ssh): nobody but
the user who runs denv decides what a cached recipe or release says.
"""

from __future__ import annotations

import hashlib
import io
import os
import pickle
import stat
import tempfile
from pathlib import Path
from typing import Any

import ruamel.yaml

from reconciler.errors import Problem
from reconciler.spec import yamlio
from reconciler.spec.sources import is_trusted_path
from reconciler.spec.yamlio import YamlDoc, parse_values

# What an entry may hold besides dicts, lists, strings, numbers, booleans and None.
_PLAIN_CLASSES = {
    ("datetime", "date"),
    ("datetime", "datetime"),
    ("datetime", "timedelta"),
    ("datetime", "timezone"),
}


class _PlainValues(pickle.Unpickler):
    """Unpickles plain values only: an entry naming any other class is refused."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _PLAIN_CLASSES:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"{module}.{name} is not a plain value")


def _parser_digest() -> bytes:
    """What the parse of a file's bytes depends on besides the bytes."""
    digest = hashlib.blake2b(ruamel.yaml.__version__.encode(), digest_size=16)
    for module_file in (yamlio.__file__, __file__):
        digest.update(Path(module_file).read_bytes())
    return digest.digest()


def _owned(info: os.stat_result) -> bool:
    """Whether a file is this user's, and only this user may write it."""
    return info.st_uid == os.getuid() and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def _private(folder: Path) -> bool:
    """Whether `folder` is a folder (not a link) that only this user may write; one that
    does not exist yet is made so."""
    try:
        info = folder.lstat()
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and _owned(info)


class ParseCache:
    """Parsed YAML values under `folder` (the CLI's: $DENV_CACHE/parsed, else
    ~/.cache/denv/parsed)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.parser = _parser_digest()

    def parse(self, path: str, data: bytes) -> tuple[YamlDoc | None, Any, Problem | None]:
        """What `parse_values` gives for `data`: from the entry when it holds these bytes of
        this path, else parsed, and kept when it parsed. A trusted path is always parsed."""
        if is_trusted_path(path) or not _private(self.folder):
            return parse_values(path, data)
        key = hashlib.blake2b(self.parser + path.encode() + b"\0" + data).digest()
        entry = self.folder / (hashlib.blake2b(path.encode(), digest_size=16).hexdigest())
        values = self._read(entry, key)
        if values is not None:  # a parsed file is never empty: None is never a file's values
            return YamlDoc(path=path, text=data.decode("utf-8")), values, None
        doc, values, problem = parse_values(path, data)
        if doc is not None:
            self._write(entry, key, values)
        return doc, values, problem

    @staticmethod
    def _read(entry: Path, key: bytes) -> Any:
        try:
            with entry.open("rb") as stream:
                if not _owned(os.fstat(stream.fileno())):
                    return None
                stored = _PlainValues(io.BytesIO(stream.read())).load()
        except Exception:  # whatever makes an entry unreadable makes it a miss
            return None
        if not (isinstance(stored, tuple) and len(stored) == 2 and stored[0] == key):
            return None
        return stored[1]

    def _write(self, entry: Path, key: bytes, values: Any) -> None:
        """Write the entry whole or not at all (a reader never sees half of one)."""
        temporary = None
        try:
            self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            if not _private(self.folder):
                return
            with tempfile.NamedTemporaryFile(dir=self.folder, delete=False) as file:
                temporary = file.name
                pickle.dump((key, values), file, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(temporary, entry)
        except (OSError, pickle.PicklingError, TypeError):
            if temporary is not None:
                Path(temporary).unlink(missing_ok=True)
