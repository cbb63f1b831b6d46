"""Choosing the forge from the environment."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.errors import ForgeError
from reconciler.forge.config import forge_kind, open_forge
from reconciler.forge.github import GitHubForge
from reconciler.forge.local import LocalForge
from tests.forge.conftest import TOKEN


@pytest.mark.parametrize(
    ("env", "kind"),
    [
        ({}, "local"),
        ({"GITHUB_ACTIONS": "true"}, "github"),
        ({"GITHUB_ACTIONS": "true", "DENV_FORGE": "local"}, "local"),
        ({"DENV_FORGE": "GitHub"}, "github"),
    ],
    ids=["default", "actions", "actions-local", "asked"],
)
def test_forge_kind(env: dict[str, str], kind: str) -> None:
    assert forge_kind(env) == kind


def test_unknown_kind_is_refused() -> None:
    with pytest.raises(ForgeError, match="expected 'local' or 'github'"):
        forge_kind({"DENV_FORGE": "gitlab"})


def test_local_by_default(git_repo: Path) -> None:
    forge = open_forge(git_repo, {"DENV_BOT_NAME": "fleet-bot"})
    assert isinstance(forge, LocalForge) and forge.bot.name == "fleet-bot"


def test_the_local_default_branch_is_main_unless_configured(git_repo: Path) -> None:
    assert open_forge(git_repo, {}).default_branch() == "main"
    assert open_forge(git_repo, {"DENV_DEFAULT_BRANCH": "trunk"}).default_branch() == "trunk"


def test_github_needs_a_repository_and_credentials(git_repo: Path) -> None:
    with pytest.raises(ForgeError, match="GITHUB_REPOSITORY"):
        open_forge(git_repo, {"DENV_FORGE": "github"})
    with pytest.raises(ForgeError, match="no GitHub credentials"):
        open_forge(git_repo, {"DENV_FORGE": "github", "GITHUB_REPOSITORY": "acme/fleet"})
    with pytest.raises(ForgeError, match="cannot read"):
        open_forge(
            git_repo,
            {
                "DENV_FORGE": "github",
                "GITHUB_REPOSITORY": "acme/fleet",
                "DENV_GITHUB_APP_ID": "1",
                "DENV_GITHUB_APP_PRIVATE_KEY_FILE": str(git_repo / "missing.pem"),
            },
        )


def test_github_enterprise_from_the_actions_environment(git_repo: Path) -> None:
    env = {
        "GITHUB_ACTIONS": "true",
        "GITHUB_REPOSITORY": "acme/fleet",
        "GITHUB_TOKEN": TOKEN,
        "GITHUB_API_URL": "https://ghe.example.com/api/v3",
        "GITHUB_SERVER_URL": "https://ghe.example.com",
    }
    forge = open_forge(git_repo, env)
    assert isinstance(forge, GitHubForge)
    assert forge.api_url == "https://ghe.example.com/api/v3"
    assert forge.git is not None and forge.git.url == "https://ghe.example.com/acme/fleet.git"
    assert forge.token() == TOKEN
    assert TOKEN not in repr(forge) and TOKEN not in repr(forge.git)
