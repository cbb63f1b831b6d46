"""Adapter: SSH signatures with OpenSSH's `ssh-keygen -Y sign` and `-Y verify`, as git signs
commits with `gpg.format ssh`. The local forge signs openings and approvals with them
(commands.py says what is signed). Everything reaches ssh-keygen as an argv list or a file,
never a shell.
"""

from __future__ import annotations

import base64
import binascii
import shutil
import subprocess
import tempfile
from pathlib import Path

from reconciler.errors import ForgeError

TIMEOUT_S = 60  # a key on a token may wait for a touch; a hung ssh-keygen must not hang denv


def _ssh_keygen() -> str:
    found = shutil.which("ssh-keygen")
    if found is None:
        raise ForgeError("ssh-keygen not found: SSH-signed approvals need OpenSSH's client")
    return found


def _run(argv: list[str], stdin: bytes) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(argv, input=stdin, capture_output=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise ForgeError(f"ssh-keygen {argv[1]} {argv[2]} took over {TIMEOUT_S} s") from None


def _said(run: subprocess.CompletedProcess[bytes]) -> str:
    lines = run.stderr.decode(errors="replace").strip().splitlines()
    return lines[-1] if lines else f"exit {run.returncode}"


def sign(key: Path, namespace: str, message: bytes) -> str:
    """The armored signature of `message` with `key` (a private key file, or a public one
    whose private half ssh-agent holds)."""
    if not key.is_file():
        raise ForgeError(f"{key}: no such key file")
    run = _run([_ssh_keygen(), "-Y", "sign", "-f", str(key), "-n", namespace], message)
    if run.returncode != 0 or b"BEGIN SSH SIGNATURE" not in run.stdout:
        raise ForgeError(f"{key}: ssh-keygen could not sign: {_said(run)}")
    return run.stdout.decode()


def verify(
    allowed_signers: str, principal: str, namespace: str, message: bytes, signature: str
) -> str | None:
    """None when `signature` of `message` is by a key `allowed_signers` lists for
    `principal` in `namespace`; else what ssh-keygen said."""
    with tempfile.TemporaryDirectory(prefix="denv-sig-") as folder:
        signers, sig = Path(folder, "allowed_signers"), Path(folder, "approval.sig")
        signers.write_text(allowed_signers)
        sig.write_text(signature)
        argv = [_ssh_keygen(), "-Y", "verify", "-f", str(signers), "-I", principal]
        run = _run([*argv, "-n", namespace, "-s", str(sig)], message)
    return None if run.returncode == 0 else _said(run)


_ARMOR = ("-----BEGIN SSH SIGNATURE-----", "-----END SSH SIGNATURE-----")
_MAGIC = b"SSHSIG"


def signer_key(signature: str) -> bytes | None:
    """The public key (its wire-format blob) an armored SSH signature carries, as OpenSSH's
    PROTOCOL.sshsig lays it out; None when `signature` is not one. `verify` checks that this
    key made the signature, so two verified signatures by one key carry the same blob."""
    lines = [line.strip() for line in signature.strip().splitlines()]
    if len(lines) < 3 or (lines[0], lines[-1]) != _ARMOR:
        return None
    try:
        raw = base64.b64decode("".join(lines[1:-1]), validate=True)
    except (binascii.Error, ValueError):
        return None
    at = len(_MAGIC) + 4  # the magic, then a uint32 version
    if not raw.startswith(_MAGIC) or len(raw) < at + 4:
        return None
    size = int.from_bytes(raw[at : at + 4], "big")
    key = raw[at + 4 : at + 4 + size]
    return key if size and len(key) == size else None
