"""The UI's HTTP server (aiohttp), read-only: GET pages, their in-place refresh and the static
files. It listens on loopback unless told otherwise; with `DENV_UI_TOKEN` set (required off
loopback) every request must carry the token: `Authorization: Bearer`, the cookie the server
sets, or `?token=` once (answered by a redirect that drops it from the address and stays on
the site). Every request must name the UI in its `Host` header: its listen address,
`localhost`, a loopback address, or a name the operator allows (`DENV_UI_HOSTS`); any other
name is a page of another site that a DNS server pointed at this one (DNS rebinding)."""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import threading
from collections.abc import Awaitable, Callable
from http.cookies import SimpleCookie
from importlib.resources import files
from pathlib import Path
from urllib.parse import urlencode

from aiohttp import web
from aiohttp.typedefs import Middleware

from reconciler.errors import DenvError, UsageError
from reconciler.ui.site import Links, NotFoundPage, Route, missing, render
from reconciler.ui.state import UiState

COOKIE = "denv_ui_token"
HEADERS = {
    # pages load only their own script and style; nothing from elsewhere, no framing
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; "
    "frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def parse_listen(listen: str) -> tuple[str, int]:
    """'HOST:PORT' (IPv6 in brackets) -> (host, port)."""
    host, sep, port = listen.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise UsageError(f"--listen {listen!r}: expected HOST:PORT, e.g. 127.0.0.1:8080")
    return host, int(port)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name: it may resolve anywhere


def check_listen(host: str, token: str | None) -> None:
    if not is_loopback(host) and not token:
        raise UsageError(
            f"--listen {host}: off loopback the UI needs a token: set DENV_UI_TOKEN "
            "(every request must then carry it)"
        )


def parse_hosts(names: str | None) -> frozenset[str]:
    """`DENV_UI_HOSTS`: names (or addresses) besides the listen address that the UI answers
    to, separated by commas, e.g. the name a reverse proxy passes on."""
    found = (name.strip().strip("[]").lower() for name in (names or "").split(","))
    return frozenset(name for name in found if name)


def _host_name(header: str) -> str:
    """The name of a `Host` header, without its port (IPv6 in brackets)."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1:].partition("]")[0]
    return header.rpartition(":")[0] if header.count(":") == 1 else header


def host_allowed(header: str | None, listen: str, allowed: frozenset[str]) -> bool:
    """Whether a request's `Host` names this UI: its listen address, `localhost`, a loopback
    address, an address when the UI listens on all of them, or a name in `allowed`. An
    address cannot be rebound by DNS; a name can, so only the operator's names count."""
    if not header:
        return False
    name = _host_name(header)
    if name in allowed or name == listen.lower() or is_loopback(name):
        return True
    # an address is no name a DNS server can point elsewhere: any, when the UI listens on all
    return _is_address(name) and _is_address(listen) and ipaddress.ip_address(listen).is_unspecified


def _is_address(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _refused(status: int, why: str) -> web.Response:
    return web.Response(status=status, text=f"{status}: {why}\n", headers=HEADERS)


def _host_gate(listen: str, allowed: frozenset[str]) -> Middleware:
    @web.middleware
    async def gate(request: web.Request, handler: Handler) -> web.StreamResponse:
        if host_allowed(request.headers.get("Host"), listen, allowed):
            return await handler(request)
        return _refused(
            421,
            "this denv UI answers to its own address only (its listen address, localhost, "
            "or a name in DENV_UI_HOSTS)",
        )

    return gate


def same_site(raw_path: str) -> str:
    """A path to redirect to that stays on this site: `//host` and `/\\host` are other sites
    to a browser, so a path is made to start with exactly one slash."""
    return "/" + raw_path.lstrip("/\\\t\r\n ")


def _token_gate(token: str) -> Middleware:
    @web.middleware
    async def gate(request: web.Request, handler: Handler) -> web.StreamResponse:
        given = request.query.get("token")
        if given is not None and hmac.compare_digest(given.encode(), token.encode()):
            rest = {k: v for k, v in request.query.items() if k != "token"}
            where = same_site(request.rel_url.raw_path)
            answer = web.HTTPSeeOther(where + ("?" + urlencode(rest) if rest else ""))
            answer.set_cookie(COOKIE, token, httponly=True, samesite="Strict")
            raise answer
        bearer = request.headers.get("Authorization", "").removeprefix("Bearer ").strip()
        cookie = SimpleCookie(request.headers.get("Cookie", "")).get(COOKIE)
        for candidate in (bearer, cookie.value if cookie else ""):
            if candidate and hmac.compare_digest(candidate.encode(), token.encode()):
                return await handler(request)
        return _refused(
            401,
            "this denv UI needs its token (DENV_UI_TOKEN): open the address once with "
            "?token=… or send Authorization: Bearer …",
        )

    return gate


def application(
    state: UiState,
    routes: list[Route],
    token: str | None,
    listen: str = "127.0.0.1",
    hosts: frozenset[str] = frozenset(),
) -> web.Application:
    """The UI's pages; `listen` (the address it listens on) and `hosts` are the names its
    requests may carry in `Host`."""
    gates = [_host_gate(listen, hosts)] + ([_token_gate(token)] if token else [])
    app = web.Application(middlewares=gates)
    links = Links(routes)

    def page(route: Route) -> Handler:
        async def handle(request: web.Request) -> web.Response:
            params = {**request.query, **request.match_info}
            fragment = request.headers.get("X-Denv-Fragment") == "main"
            try:
                with state.lock:
                    try:
                        shown = route.view(state, params)
                    except NotFoundPage as exc:
                        shown = missing(state, exc)
                    html = render(shown, state, links, routes, fragment)
            except DenvError as exc:  # bad parameters: say which, as the CLI would
                return web.Response(status=400, text=f"400: {exc}\n", headers=HEADERS)
            except Exception as exc:  # a bug: say what, without a traceback
                text = f"500: {type(exc).__name__}: {exc}\n"
                return web.Response(status=500, text=text, headers=HEADERS)
            return web.Response(
                status=shown.status, text=html, content_type="text/html", headers=HEADERS
            )

        return handle

    for route in routes:
        app.router.add_get(route.path, page(route), name=route.name)
    app.router.add_static("/static", Path(str(files("reconciler.ui") / "static")))
    return app


class UiServer:
    """The server on its own event loop, in a thread: for `denv ui` and beside the bot."""

    def __init__(
        self,
        state: UiState,
        routes: list[Route],
        listen: str,
        token: str | None,
        hosts: frozenset[str] = frozenset(),
    ) -> None:
        self.host, self.port = parse_listen(listen)
        check_listen(self.host, token)
        self.app = application(state, routes, token, self.host, hosts)
        self.loop = asyncio.new_event_loop()
        self.started = threading.Event()
        self.failed: BaseException | None = None
        self.url = ""
        self.thread = threading.Thread(target=self._run, name="denv-ui", daemon=True)

    def start(self) -> str:
        """Listen; the address to open (the port chosen when 0 was given)."""
        self.thread.start()
        self.started.wait()
        if self.failed is not None:
            raise DenvError(f"the UI cannot listen on {self.host}:{self.port}: {self.failed}")
        return self.url

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        runner = web.AppRunner(self.app, access_log=None)  # a ?token= must not reach a log
        try:
            self.loop.run_until_complete(runner.setup())
            site = web.TCPSite(runner, self.host, self.port)
            self.loop.run_until_complete(site.start())
            port = runner.addresses[0][1]
            host = f"[{self.host}]" if ":" in self.host else self.host
            self.url = f"http://{host}:{port}/"
        except OSError as exc:
            self.failed = exc
            self.started.set()
            return
        self.started.set()
        try:
            self.loop.run_forever()
        finally:
            self.loop.run_until_complete(runner.cleanup())
            self.loop.close()

    def stop(self) -> None:
        if self.thread.is_alive():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(timeout=10)
