"""Serve a fake's `handle(method, target, headers, body)` over HTTP on a loopback port."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Handle = Callable[[str, str, dict[str, str], bytes], tuple[int, Any, dict[str, str]]]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    handle_request: Handle

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        headers = {k.lower(): v for k, v in self.headers.items()}
        status, data, extra = self.handle_request(self.command, self.path, headers, body)
        payload = b"" if data is None else json.dumps(data).encode()
        self.send_response(status)
        if data is not None:
            self.send_header("Content-Type", "application/json; charset=utf-8")
        for key, value in extra.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _serve

    def log_message(self, format: str, *args: Any) -> None:
        pass  # fakes keep their own record of requests


class LoopbackServer:
    """`handle` on a loopback port, in a thread of the test process."""

    def __init__(self, handle: Handle) -> None:
        handler = type("Handler", (_Handler,), {"handle_request": staticmethod(handle)})
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=10)
