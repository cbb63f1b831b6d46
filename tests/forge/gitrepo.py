"""Real git repositories for the forge tests, driven with the git command line as a person would."""

from __future__ import annotations

import subprocess
from pathlib import Path

HUMAN = ("Ada Lovelace", "ada@example.com")


def git(repo: Path, *args: str) -> str:
    env = {
        "GIT_AUTHOR_NAME": HUMAN[0],
        "GIT_AUTHOR_EMAIL": HUMAN[1],
        "GIT_COMMITTER_NAME": HUMAN[0],
        "GIT_COMMITTER_EMAIL": HUMAN[1],
        "HOME": str(repo),
        "PATH": "/usr/bin:/bin",
    }
    run = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, env=env, timeout=30
    )
    assert run.returncode == 0, f"git {' '.join(args)}: {run.stderr}"
    return run.stdout.strip()


def init_repo(root: Path) -> Path:
    """`root` (already holding files) as a repository with one commit on main."""
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.name", HUMAN[0])
    git(root, "config", "user.email", HUMAN[1])
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "denv repository")
    return root


def commit_file(repo: Path, path: str, text: str, message: str) -> str:
    (repo / path).parent.mkdir(parents=True, exist_ok=True)
    (repo / path).write_text(text)
    git(repo, "add", path)
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")
