"""Fakes we own for a fleet that is not simulated, on this machine without GPUs: an
`nvidia-smi` that lists GPUs, and a package index (PIP_INDEX_URL) serving stub wheels of the
engines, each an HTTP server that answers 200 to every GET (health, readiness), so a real
prepare job builds real venvs with pip, and the units they run become ready.

The index holds every project page until `release()`: a prepare that blocks in pip for as
long as the test wants, as a slow mirror or a large download does.
"""

from __future__ import annotations

import base64
import hashlib
import io
import threading
import zipfile
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

STUB_SERVER = """\
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"{}"
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def main():
    args = sys.argv[1:]
    host, port = args[args.index("--host") + 1], int(args[args.index("--port") + 1])
    ThreadingHTTPServer((host, port), Handler).serve_forever()


if __name__ == "__main__":
    main()
"""

# project -> (version, {module path: source}); the modules the engines' argv run with -m
STUBS = {
    "vllm": ("0.33.0", {"vllm/entrypoints/cli/main.py": STUB_SERVER}),
    "sglang-router": ("0.3.2", {"sglang_router/launch_router.py": STUB_SERVER}),
}

NVIDIA_SMI = """#!/bin/sh
# two GPUs, no compute apps: what the agent's nvidia-smi probe reads
case "$1" in
  --query-gpu=*)
    echo "0, GPU-stub-0, NVIDIA H200, 143771, 0, 570.00"
    echo "1, GPU-stub-1, NVIDIA H200, 143771, 0, 570.00" ;;
esac
"""


def fake_nvidia_smi(folder: Path) -> Path:
    """A folder holding an `nvidia-smi` to put first on PATH."""
    folder.mkdir(parents=True, exist_ok=True)
    tool = folder / "nvidia-smi"
    tool.write_text(NVIDIA_SMI)
    tool.chmod(0o755)
    return folder


def _record_hash(content: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(content).digest()).rstrip(b"=")
    return "sha256=" + digest.decode()


def wheel(project: str, version: str, modules: dict[str, str]) -> tuple[str, bytes]:
    """(file name, bytes) of a pure-Python wheel holding `modules` and their packages."""
    dist = project.replace("-", "_")
    info = f"{dist}-{version}.dist-info"
    files = {path: text.encode() for path, text in modules.items()}
    for path in list(files):
        parts = path.split("/")[:-1]
        for depth in range(1, len(parts) + 1):
            files.setdefault("/".join(parts[:depth]) + "/__init__.py", b"")
    files[f"{info}/METADATA"] = (
        f"Metadata-Version: 2.1\nName: {project}\nVersion: {version}\n".encode()
    )
    files[f"{info}/WHEEL"] = (
        b"Wheel-Version: 1.0\nGenerator: denv-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    record = "".join(f"{p},{_record_hash(c)},{len(c)}\n" for p, c in sorted(files.items()))
    files[f"{info}/RECORD"] = (record + f"{info}/RECORD,,\n").encode()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path, content in sorted(files.items()):
            archive.writestr(path, content)
    return f"{dist}-{version}-py3-none-any.whl", buffer.getvalue()


class StubIndex:
    """A PEP 503 simple index of the stub engines on loopback."""

    def __init__(self) -> None:
        self.pages: Counter[str] = Counter()  # project page -> requests that reached it
        self.asked = threading.Event()  # a project page was asked for
        self._released = threading.Event()
        self._wheels = {name: wheel(name, *stub) for name, stub in STUBS.items()}
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/simple"

    def start(self) -> StubIndex:
        self._thread.start()
        return self

    def release(self) -> None:
        """Answer the held pages, and every page from now on at once."""
        self._released.set()

    def stop(self) -> None:
        self._released.set()
        self._server.shutdown()
        self._server.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        index = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                return None

            def do_GET(self) -> None:
                index._answer(self)

        return Handler

    def _answer(self, request: BaseHTTPRequestHandler) -> None:
        parts = request.path.split("?")[0].strip("/").split("/")
        if parts[:1] == ["simple"] and len(parts) == 2 and parts[1] in self._wheels:
            self.pages[parts[1]] += 1
            self.asked.set()
            self._released.wait()  # the server's pace, not a test waiting
            name, _ = self._wheels[parts[1]]
            body = f'<html><body><a href="/files/{name}">{name}</a></body></html>'.encode()
            self._send(request, 200, "text/html", body)
            return
        if parts[:1] == ["files"] and len(parts) == 2:
            found = [w for w in self._wheels.values() if w[0] == parts[1]]
            if found:
                self._send(request, 200, "application/octet-stream", found[0][1])
                return
        self._send(request, 404, "text/plain", b"not here")

    @staticmethod
    def _send(request: BaseHTTPRequestHandler, status: int, kind: str, body: bytes) -> None:
        request.send_response(status)
        request.send_header("Content-Type", kind)
        request.send_header("Content-Length", str(len(body)))
        request.end_headers()
        request.wfile.write(body)
