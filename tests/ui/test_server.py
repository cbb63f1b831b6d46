"""`denv ui`'s server over a real look at this repository's release on the local fleet: the
pages, their in-place refresh, the token gate, the loopback rule and the export."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from html import unescape
from pathlib import Path

import pytest

from reconciler.errors import UsageError
from reconciler.ui.export import export
from reconciler.ui.pages import ROUTES
from reconciler.ui.server import UiServer
from reconciler.ui.state import Gather, Refresher, UiState
from tests.reconcile.conftest import GitRepo, git_repo
from tests.ui.looked import look

__all__ = ["git_repo"]  # the fixture

DENV = [sys.executable, "-m", "reconciler"]


@pytest.fixture
def looked(git_repo: GitRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> UiState:
    """One look at the repository: chat-8b on the local fleet, which runs nothing yet."""
    monkeypatch.setenv("DENV_HOME", str(tmp_path / "home"))
    return look(git_repo.path, git_repo.cache)


def serve(state: UiState, token: str | None = None) -> Iterator[str]:
    server = UiServer(state, ROUTES, "127.0.0.1:0", token)
    try:
        yield server.start()
    finally:
        server.stop()


@pytest.fixture
def url(looked: UiState) -> Iterator[str]:
    yield from serve(looked)


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


def get(address: str, headers: dict[str, str] | None = None) -> tuple[int, str, dict[str, str]]:
    opener = urllib.request.build_opener(NoRedirect)
    request = urllib.request.Request(address, headers=headers or {})
    try:
        with opener.open(request, timeout=30) as answer:
            return answer.status, answer.read().decode(), dict(answer.headers)
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(), dict(error.headers)


def test_the_overview_shows_each_stage_of_the_release_on_its_fleet(url: str) -> None:
    status, html, headers = get(url)
    assert status == 200
    assert 'data-key="chat-8b/canary/local"' in html and 'data-key="chat-8b/prod/local"' in html
    prod = html.split('data-key="chat-8b/prod/local"')[1].split("</tr>")[0]
    assert "not deployed" in prod
    assert "default-src 'self'" in headers["Content-Security-Policy"]


def test_the_status_line_names_the_repository_it_looked_at(
    git_repo: GitRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`denv ui --repo .` (the default): the line says which folder, never '. at …'."""
    monkeypatch.setenv("DENV_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(git_repo.path)
    state = UiState(refresh=60)
    gather = Gather(".", git_repo.cache)
    try:
        Refresher(state, gather).once()
    finally:
        gather.close()
    assert state.overview is not None
    for url in serve(state):
        html = get(url)[1]
        line = " ".join(html.split('<p class="look" role="status">')[1].split("</p>")[0].split())
        head = state.overview.head[:12]
        assert line.startswith(f"{git_repo.path.name} at {head} · looked "), line


def test_before_any_bot_the_ui_and_denv_status_say_the_same_state(
    url: str, git_repo: GitRepo, tmp_path: Path
) -> None:
    """No bot has run: nothing deploys, whatever the plan has to start. One word for it on
    the overview, the release page and in `denv status` (text and --json)."""
    waiting = "waiting for the bot"
    overview = get(url)[1]
    canary = overview.split('data-key="chat-8b/canary/local"')[1].split("</tr>")[0]
    assert f'class="badge deploying">{waiting}<' in canary
    assert f"local: {waiting}: no reconciler has run here yet" in overview
    release = get(url + "releases/chat-8b")[1]
    stage = release.split('data-stage="chat-8b/canary"')[1].split("</li>")[0]
    assert f">{waiting}</span>" in stage
    env = {"PATH": "/usr/bin:/bin", "HOME": str(Path.home()), "DENV_HOME": str(tmp_path / "home")}
    env["DENV_MACHINE_DIR"] = os.environ["DENV_MACHINE_DIR"]  # the test's local leases
    env |= {"DENV_CACHE": str(git_repo.cache), "COLUMNS": "200"}
    status = [*DENV, "status", "--repo", str(git_repo.path)]
    text = subprocess.run(status, capture_output=True, text=True, timeout=120, env=env)
    assert text.returncode == 0, text.stderr
    canary_line = next(line for line in text.stdout.splitlines() if "canary" in line)
    assert waiting in canary_line, text.stdout
    assert f"local: {waiting}: no reconciler has run here yet" in text.stdout
    done = subprocess.run([*status, "--json"], capture_output=True, text=True, timeout=120, env=env)
    rows = {r["stage"]: r["state"] for r in json.loads(done.stdout)["deployments"]}
    assert rows == {"canary": waiting}  # prod: no pin yet, no row
    for page in (overview, release, text.stdout, done.stdout):
        assert "deploying" not in re.sub(r"<[^>]*>", " ", page)  # in words; a class may say it


def test_a_refresh_asks_for_the_main_content_only(url: str) -> None:
    status, html, _ = get(url + "releases/chat-8b", {"X-Denv-Fragment": "main"})
    assert status == 200
    assert html.lstrip().startswith("<h1>Release chat-8b</h1>")
    assert "<html" not in html and 'data-stage="chat-8b/canary"' in html


@pytest.mark.parametrize(
    ("path", "what", "back"),
    [
        ("releases/nope", "No release 'nope'.", 'href="/">Back to the overview'),
        ("results/nope", "No result 'nope'.", 'href="/results">Back to the results'),
    ],
    ids=["release", "result"],
)
def test_a_missing_name_is_a_page_with_status_404(
    url: str, path: str, what: str, back: str
) -> None:
    status, html, headers = get(url + path)
    assert status == 404 and headers["Content-Type"].startswith("text/html")
    assert "<h1>Not found</h1>" in html and what in unescape(html) and back in html
    assert 'aria-label="Pages"' in html and "denv.css" in html  # the site's layout and nav
    assert "data-refresh-ms" not in html  # nothing will appear by waiting


def test_during_the_first_look_a_release_page_says_it_is_still_looking(
    git_repo: GitRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DENV_HOME", str(tmp_path / "home"))
    state = UiState(refresh=60)  # served before its first look has ended
    for url in serve(state):
        status, html, _ = get(url + "releases/chat-8b")
        assert status == 200, html
        assert "<h1>Looking</h1>" in html and "looking at git and the fleets" in html
        assert "data-refresh-ms" in html  # refreshed in place until the look ends
        assert "no release" not in html.lower()
        gather = Gather(str(git_repo.path), git_repo.cache)
        try:
            Refresher(state, gather).once()
        finally:
            gather.close()
        status, html, _ = get(url + "releases/chat-8b", {"X-Denv-Fragment": "main"})
        assert status == 200 and html.lstrip().startswith("<h1>Release chat-8b</h1>")
        assert get(url + "releases/nope")[0] == 404


def test_when_the_first_look_failed_a_page_says_so_with_503() -> None:
    state = UiState(refresh=60, error="main: cannot fetch: no such repository")
    for url in serve(state):
        status, html, _ = get(url + "releases/chat-8b")
        assert status == 503
        assert "the last look failed: main: cannot fetch" in html and "<h1>Looking</h1>" in html


def test_with_a_token_every_request_must_carry_it(looked: UiState) -> None:
    for url in serve(looked, token="s3cret-token"):
        assert get(url)[0] == 401
        assert get(url + "static/denv.css")[0] == 401
        assert get(url, {"Authorization": "Bearer wrong"})[0] == 401
        assert get(url, {"Authorization": "Bearer s3cret-token"})[0] == 200
        # once in the address: a cookie, and a redirect to the address without it
        status, _, headers = get(url + "releases/chat-8b?token=s3cret-token")
        assert status == 303 and headers["Location"] == "/releases/chat-8b"
        cookie = headers["Set-Cookie"].split(";")[0]
        assert "HttpOnly" in headers["Set-Cookie"]
        assert get(url + "releases/chat-8b", {"Cookie": cookie})[0] == 200
        assert get(url, {"Cookie": "denv_ui_token=wrong"})[0] == 401


def test_off_loopback_it_needs_a_token(looked: UiState) -> None:
    with pytest.raises(UsageError, match="DENV_UI_TOKEN"):
        UiServer(looked, ROUTES, "0.0.0.0:0", None)
    cli = subprocess.run(
        [sys.executable, "-m", "reconciler", "ui", "--listen", "0.0.0.0:0"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "HOME": str(Path.home())},
    )
    assert cli.returncode == 1
    assert "needs a token: set DENV_UI_TOKEN" in cli.stderr and "Traceback" not in cli.stderr


def test_a_port_in_use_is_one_line_and_exit_1(git_repo: GitRepo) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        cli = subprocess.run(
            [*DENV, "ui", "--listen", f"127.0.0.1:{port}", "--repo", str(git_repo.path)],
            capture_output=True,
            text=True,
            timeout=60,
            env={"PATH": "/usr/bin:/bin", "HOME": str(Path.home())},
        )
    assert cli.returncode == 1, cli.stderr
    assert cli.stdout == ""
    lines = cli.stderr.splitlines()
    assert len(lines) == 1 and f"cannot listen on 127.0.0.1:{port}" in lines[0], cli.stderr
    assert "address already in use" in lines[0]


def test_the_export_writes_pages_that_link_to_each_other_by_file(
    looked: UiState, tmp_path: Path
) -> None:
    written = export(looked, ROUTES, tmp_path / "site")
    names = {p.relative_to(tmp_path / "site").as_posix() for p in written}
    assert {"index.html", "release-chat-8b.html", "static/denv.css", "static/denv.js"} <= names
    index = (tmp_path / "site" / "index.html").read_text()
    assert 'href="release-chat-8b.html"' in index and 'href="static/denv.css"' in index
    assert "data-refresh-ms" not in index  # a snapshot: nothing to poll
    assert 'data-key="chat-8b/canary/local"' in index


def test_the_export_says_what_it_does_while_it_does_it(git_repo: GitRepo, tmp_path: Path) -> None:
    """Not a terminal: plain lines on stderr, each step as it starts, then the count written;
    stdout keeps the command's own line."""
    env = {"PATH": "/usr/bin:/bin", "HOME": str(Path.home()), "DENV_HOME": str(tmp_path / "home")}
    env["DENV_MACHINE_DIR"] = os.environ["DENV_MACHINE_DIR"]  # the test's local leases
    site = tmp_path / "site"
    argv = [*DENV, "ui", "--export", str(site), "--repo", str(git_repo.path)]
    env |= {"DENV_CACHE": str(git_repo.cache)}
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    pages = len(list(site.glob("*.html")))
    lines = [re.sub(r"^\[ *\d+\.\ds\] ", "", line) for line in done.stderr.splitlines()]
    assert lines[:2] == ["looking at git and the fleets", f"writing the pages into {site}"]
    assert lines[2].startswith(f"pages — {pages}/{pages}, ") and len(lines) == 3, done.stderr
    assert done.stdout.startswith(f"{pages} pages in {site}")
