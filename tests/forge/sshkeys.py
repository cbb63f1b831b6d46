"""Real SSH keys for the signed approvals of the local forge, made with OpenSSH's ssh-keygen."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.forge.gitrepo import commit_file, git

SIGNERS = "policies/allowed_signers"


def new_key(folder: Path, name: str) -> Path:
    """A passphrase-less ed25519 key `folder/name` (its public half beside it, `.pub`)."""
    key = folder / f"{name}-key"
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(key)],
        check=True,
        capture_output=True,
        timeout=30,
    )
    return key


def signer_line(name: str, key: Path) -> str:
    return f"{name} {key.with_suffix('.pub').read_text().strip()}\n"


def allow(repo: Path, signers: dict[str, Path], branch: str = "main") -> str:
    """Commit `policies/allowed_signers` listing each name's key on `branch`; its commit."""
    git(repo, "checkout", "-q", branch)
    text = "# who may approve on the local forge\n" + "".join(
        signer_line(name, key) for name, key in signers.items()
    )
    sha = commit_file(repo, SIGNERS, text, "allowed signers")
    git(repo, "checkout", "-q", "main")
    return sha


def sign_openings(repo: Path, name: str = "Ada Lovelace", listed: bool = False) -> Path:
    """A key for `name` (git's user.name in the test repositories) that `git config
    user.signingKey` names, so that `denv pr open` signs with it; `listed`: main's allowed
    signers list it too (then the opening names its author and approvals can count)."""
    folder = repo.parent / f"{repo.name}-keys"
    folder.mkdir(exist_ok=True)
    key = new_key(folder, name.replace(" ", "-"))
    git(repo, "config", "user.signingKey", str(key))
    if listed:
        git(repo, "checkout", "-q", "main")
        old = (repo / SIGNERS).read_text() if (repo / SIGNERS).is_file() else ""
        commit_file(repo, SIGNERS, old + signer_line(f'"{name}"', key), f"{name} signs")
    return key
