"""Adapter: which forge to use, from the environment the caller passes in.

The local forge is the default. GitHub is used when `DENV_FORGE=github`, or inside GitHub
Actions (`GITHUB_ACTIONS=true`) unless `DENV_FORGE=local` says otherwise. docs/github.md
lists the variables; secrets are read from them and never echoed back.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from reconciler.errors import ForgeError
from reconciler.forge.local import LocalForge
from reconciler.forge.protocol import DEFAULT_BRANCH, DENV_BOT, BotIdentity, Forge

DEFAULT_SERVER = "https://github.com"


def forge_kind(env: Mapping[str, str]) -> str:
    kind = env.get("DENV_FORGE", "").strip().lower()
    if not kind:
        kind = "github" if env.get("GITHUB_ACTIONS") == "true" else "local"
    if kind not in ("local", "github"):
        raise ForgeError(f"DENV_FORGE={kind!r}: expected 'local' or 'github'")
    return kind


def bot_identity(env: Mapping[str, str]) -> BotIdentity:
    return BotIdentity(
        name=env.get("DENV_BOT_NAME", DENV_BOT.name),
        email=env.get("DENV_BOT_EMAIL", DENV_BOT.email),
    )


def _private_key(env: Mapping[str, str]) -> str | None:
    if env.get("DENV_GITHUB_APP_PRIVATE_KEY"):
        return env["DENV_GITHUB_APP_PRIVATE_KEY"]
    path = env.get("DENV_GITHUB_APP_PRIVATE_KEY_FILE")
    if path:
        try:
            return Path(path).read_text()
        except OSError as exc:
            raise ForgeError(
                f"DENV_GITHUB_APP_PRIVATE_KEY_FILE: cannot read {path} ({exc})"
            ) from exc
    return None


def local_forge(root: Path, env: Mapping[str, str], user: str | None = None) -> LocalForge:
    """The local forge of the repository at `root`, its default branch `main` unless
    DENV_DEFAULT_BRANCH names another."""
    branch = env.get("DENV_DEFAULT_BRANCH", DEFAULT_BRANCH)
    return LocalForge(root, user=user, bot=bot_identity(env), default_branch=branch)


def open_forge(root: Path, env: Mapping[str, str], user: str | None = None) -> Forge:
    """The forge for the repository at `root`; `user` names the local forge's person."""
    if forge_kind(env) == "local":
        return local_forge(root, env, user)
    return open_github(root, env)


def open_github(root: Path, env: Mapping[str, str]) -> Forge:
    # imported here: PyGithub (only forge/github.py imports it) is only loaded by commands
    # that talk to GitHub
    from reconciler.forge.github import DEFAULT_API, GitHubForge, app_auth, token_auth
    from reconciler.forge.gitremote import GitRemote

    repository = env.get("DENV_GITHUB_REPOSITORY") or env.get("GITHUB_REPOSITORY")
    if not repository or repository.count("/") != 1:
        raise ForgeError("set GITHUB_REPOSITORY (owner/name) to use the GitHub forge")
    app_id, key = env.get("DENV_GITHUB_APP_ID"), _private_key(env)
    token = env.get("DENV_GITHUB_TOKEN") or env.get("GITHUB_TOKEN")
    if app_id and key:
        installation = env.get("DENV_GITHUB_APP_INSTALLATION_ID", "")
        if not installation.isdigit():
            raise ForgeError("DENV_GITHUB_APP_INSTALLATION_ID must be the installation's number")
        auth, app = app_auth(app_id, key, int(installation))
    elif token:
        auth, app = token_auth(token), None
    else:
        raise ForgeError(
            "no GitHub credentials: set DENV_GITHUB_TOKEN (or GITHUB_TOKEN), or "
            "DENV_GITHUB_APP_ID, DENV_GITHUB_APP_PRIVATE_KEY(_FILE) and "
            "DENV_GITHUB_APP_INSTALLATION_ID"
        )
    server = env.get("GITHUB_SERVER_URL", DEFAULT_SERVER).rstrip("/")
    forge = GitHubForge(
        repository,
        auth,
        api_url=env.get("GITHUB_API_URL", DEFAULT_API),
        bot=bot_identity(env),
        bot_login=env.get("DENV_BOT_LOGIN") or None,
        app=app,
    )
    forge.git = GitRemote(root, f"{server}/{repository}.git", forge.token)
    return forge
