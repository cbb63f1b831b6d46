"""A fake Hugging Face Hub on loopback: just what huggingface_hub's `model_info`,
`snapshot_download` and `hf_hub_download` ask of it, with counters, and a loud failure on any
other request.

Two listeners, like the real Hub and its CDN: the hub answers the API and `/resolve/`; large
(LFS) files redirect to the CDN, another origin, so the library drops the token there. Headers
follow huggingface_hub's file_download.py: `X-Repo-Commit` on every resolve answer, `ETag` (a
git blob id) for small files, `X-Linked-Etag` (the sha256) and `X-Linked-Size` on the redirect
of a large one.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

LFS_FROM = 1024  # bytes: larger files are served as LFS blobs through the CDN
API_KINDS = ("revision", "tree")


@dataclass
class Repo:
    commit: str
    files: dict[str, bytes]
    token: str | None = None  # gated: this Bearer token is required
    served: dict[str, bytes] = field(default_factory=dict)  # bodies that differ from the listing


def git_blob_id(content: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()


class FakeHub:
    def __init__(self) -> None:
        self.repos: dict[str, Repo] = {}
        self.api_calls: Counter[str] = Counter()  # "model_info", "tree"
        self.downloads: Counter[str] = Counter()  # file path -> bodies started (hub and CDN)
        self.auth_seen: list[tuple[str, str | None]] = []  # (listener, Authorization header)
        self.unexpected: list[str] = []
        self.pause = 0.0  # seconds between 64 kB pieces of a file body: a slow link
        self._lock = threading.Lock()
        self._hub = ThreadingHTTPServer(("127.0.0.1", 0), self._handler("hub"))
        self._cdn = ThreadingHTTPServer(("127.0.0.1", 0), self._handler("cdn"))
        self._threads = [
            threading.Thread(target=server.serve_forever, daemon=True)
            for server in (self._hub, self._cdn)
        ]

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._hub.server_address[1]}"

    @property
    def cdn(self) -> str:
        return f"http://127.0.0.1:{self._cdn.server_address[1]}"

    def add_repo(self, repo_id: str, files: dict[str, bytes], token: str | None = None) -> str:
        """Publish `files` as one commit of `repo_id`; its full commit id."""
        commit = hashlib.sha1(repo_id.encode() + json.dumps(sorted(files)).encode()).hexdigest()
        self.repos[repo_id] = Repo(commit, dict(files), token)
        return commit

    def start(self) -> FakeHub:
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> None:
        for server in (self._hub, self._cdn):
            server.shutdown()
            server.server_close()

    def _handler(self, listener: str) -> type[BaseHTTPRequestHandler]:
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                return None

            def do_GET(self) -> None:
                hub._answer(self, listener, body=True)

            def do_HEAD(self) -> None:
                hub._answer(self, listener, body=False)

            def do_POST(self) -> None:
                hub._refuse(self, listener)

        return Handler

    # --- routing ---------------------------------------------------------------------------

    def _answer(self, request: BaseHTTPRequestHandler, listener: str, body: bool) -> None:
        path = unquote(urlsplit(request.path).path)
        with self._lock:
            self.auth_seen.append((listener, request.headers.get("Authorization")))
        if listener == "cdn" and path.startswith("/blobs/"):
            self._blob(request, path[len("/blobs/") :], body)
            return
        parts = path.strip("/").split("/")
        api = len(parts) == 6 and parts[:2] == ["api", "models"] and parts[4] in API_KINDS
        if listener == "hub" and api:  # model_info at a revision; the recursive tree listing
            repo_id, kind, revision = "/".join(parts[2:4]), parts[4], parts[5]
            if self._allowed(request, repo_id, revision):
                self._api(request, self.repos[repo_id], kind)
            return
        if listener == "hub" and len(parts) >= 5 and parts[2] == "resolve":
            repo_id, revision, file = "/".join(parts[:2]), parts[3], "/".join(parts[4:])
            if self._allowed(request, repo_id, revision):
                self._resolve(request, self.repos[repo_id], file, body)
            return
        self._refuse(request, listener)

    def _refuse(self, request: BaseHTTPRequestHandler, listener: str) -> None:
        with self._lock:
            self.unexpected.append(f"{listener} {request.command} {request.path}")
        self._send(request, 500, {}, b"unexpected request for the fake hub")

    def _allowed(self, request: BaseHTTPRequestHandler, repo_id: str, revision: str) -> bool:
        repo = self.repos.get(repo_id)
        if repo is None:
            self._send(request, 404, {"X-Error-Code": "RepoNotFound"}, b"no such repo")
            return False
        if repo.token and request.headers.get("Authorization") != f"Bearer {repo.token}":
            headers = {"X-Error-Code": "GatedRepo", "X-Error-Message": "gated repo"}
            self._send(request, 401, headers, b"gated")
            return False
        if not (len(revision) >= 7 and repo.commit.startswith(revision)):
            self._send(request, 404, {"X-Error-Code": "RevisionNotFound"}, b"no such revision")
            return False
        return True

    # --- answers ---------------------------------------------------------------------------

    def _api(self, request: BaseHTTPRequestHandler, repo: Repo, kind: str) -> None:
        with self._lock:
            self.api_calls["model_info" if kind == "revision" else "tree"] += 1
        if kind == "revision":
            siblings = [self._sibling(path, content) for path, content in repo.files.items()]
            info: dict[str, object] = {"id": self._repo_id(repo), "sha": repo.commit}
            info |= {
                "siblings": siblings,
                "private": False,
                "gated": "auto" if repo.token else False,
            }
            self._send(request, 200, {}, json.dumps(info).encode())
            return
        entries: list[dict[str, object]] = []
        folders = sorted({p.rsplit("/", 1)[0] for p in repo.files if "/" in p})
        for folder in folders:
            entries.append({"type": "directory", "oid": "0" * 40, "size": 0, "path": folder})
        for path, content in sorted(repo.files.items()):
            entry: dict[str, object] = {"type": "file", "path": path, "size": len(content)}
            entry["oid"] = git_blob_id(content)
            if len(content) >= LFS_FROM:
                entry["lfs"] = {
                    "oid": hashlib.sha256(content).hexdigest(),
                    "size": len(content),
                    "pointerSize": 134,
                }
            entries.append(entry)
        self._send(request, 200, {}, json.dumps(entries).encode())

    def _sibling(self, path: str, content: bytes) -> dict[str, object]:
        sibling: dict[str, object] = {"rfilename": path, "size": len(content)}
        sibling["blobId"] = git_blob_id(content)
        if len(content) >= LFS_FROM:
            sha = hashlib.sha256(content).hexdigest()
            sibling["lfs"] = {"size": len(content), "sha256": sha, "pointerSize": 134}
        return sibling

    def _repo_id(self, repo: Repo) -> str:
        return next(name for name, known in self.repos.items() if known is repo)

    def _resolve(self, request: BaseHTTPRequestHandler, repo: Repo, file: str, body: bool) -> None:
        if file not in repo.files:
            self._send(request, 404, {"X-Error-Code": "EntryNotFound"}, b"no such file")
            return
        content = repo.served.get(file, repo.files[file])
        headers = {"X-Repo-Commit": repo.commit}
        if len(repo.files[file]) >= LFS_FROM:  # large: the hub redirects to its CDN
            sha = hashlib.sha256(repo.files[file]).hexdigest()
            headers |= {"X-Linked-Etag": f'"{sha}"', "X-Linked-Size": str(len(content))}
            headers["Location"] = f"{self.cdn}/blobs/{sha}"
            self._send(request, 302, headers, b"")
            return
        headers["ETag"] = f'"{git_blob_id(repo.files[file])}"'
        headers["Content-Type"] = "application/octet-stream"
        self._send(request, 200, headers, b"", length=len(content))
        if body:
            self._write_body(request, file, content)

    def _blob(self, request: BaseHTTPRequestHandler, sha: str, body: bool) -> None:
        for repo in self.repos.values():
            for path, content in repo.files.items():
                if hashlib.sha256(content).hexdigest() == sha:
                    served = repo.served.get(path, content)
                    headers = {"Content-Type": "application/octet-stream"}
                    self._send(request, 200, headers, b"", length=len(served))
                    if body:
                        self._write_body(request, path, served)
                    return
        self._refuse(request, "cdn")

    def _write_body(self, request: BaseHTTPRequestHandler, path: str, content: bytes) -> None:
        """Send a file's body (counted when it starts), in 64 kB pieces at the hub's pace."""
        with self._lock:
            self.downloads[path] += 1
        piece = 64 * 1024
        try:
            for start in range(0, len(content), piece):
                request.wfile.write(content[start : start + piece])
                if self.pause:
                    time.sleep(self.pause)  # the server's pace, not a test waiting
        except (BrokenPipeError, ConnectionResetError):
            request.close_connection = True  # the client went away (a killed download)

    @staticmethod
    def _send(
        request: BaseHTTPRequestHandler,
        status: int,
        headers: dict[str, str],
        body: bytes,
        length: int | None = None,
    ) -> None:
        request.send_response(status)
        for name, value in headers.items():
            request.send_header(name, value)
        if "Content-Type" not in headers:
            request.send_header("Content-Type", "application/json")
        request.send_header("Content-Length", str(len(body) if length is None else length))
        request.end_headers()
        if body and request.command != "HEAD":
            request.wfile.write(body)
