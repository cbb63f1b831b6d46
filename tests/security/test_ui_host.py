"""`denv ui` as a page of another site would reach it: through a DNS name the attacker pointed
at 127.0.0.1 (DNS rebinding: the browser sends that name in `Host`), or through an address
with `?token=` that redirects elsewhere. Real HTTP requests against the real `denv ui`."""

from __future__ import annotations

import http.client
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.e2e.bot import bot_env
from tests.reconcile.conftest import GitRepo, git_repo
from tests.ui.denv import Denv

__all__ = ["git_repo"]  # the fixture

TOKEN = "s3cret-token"


@pytest.fixture
def denv(git_repo: GitRepo, tmp_path: Path) -> Iterator[Denv]:
    git_repo.commit("initial")
    found = Denv(git_repo, bot_env(tmp_path / "cache"), tmp_path)
    yield found
    found.stop()


def request(url: str, path: str, host: str) -> tuple[int, dict[str, str]]:
    """GET `path` from the UI at `url`, naming `host` in the Host header."""
    where = urlsplit(url)
    connection = http.client.HTTPConnection(where.hostname or "", where.port, timeout=30)
    try:
        connection.putrequest("GET", path, skip_host=True)
        connection.putheader("Host", host)
        connection.endheaders()
        answer = connection.getresponse()
        answer.read()
        return answer.status, dict(answer.getheaders())
    finally:
        connection.close()


def test_a_name_the_ui_does_not_answer_to_is_refused(denv: Denv) -> None:
    url = denv.ui(env={"DENV_UI_HOSTS": "denv.internal.example"})
    port = urlsplit(url).port
    for host in ("evil.example", f"evil.example:{port}", "127.0.0.1.evil.example", ""):
        status, _ = request(url, "/static/denv.css", host)
        assert status == 421, host
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", "denv.internal.example", "[::1]"):
        status, _ = request(url, "/static/denv.css", host)
        assert status == 200, host


# `//host` and its encoded form `/%2Fhost` (a redirect to the decoded path) went off the site
# before; aiohttp itself already kept `/\host` and `///host` on it: they guard the rule.
@pytest.mark.parametrize(
    "path", ["//evil.example/", "/%2Fevil.example/", "/\\evil.example/", "///evil.example"]
)
def test_a_token_redirect_stays_on_the_site(denv: Denv, path: str) -> None:
    url = denv.ui(env={"DENV_UI_TOKEN": TOKEN})
    status, headers = request(url, f"{path}?token={TOKEN}", urlsplit(url).netloc)
    assert status == 303
    location = headers["Location"]
    assert location.startswith("/") and location[1:2] not in ("/", "\\"), location
    assert "evil.example" not in urlsplit(location).netloc
