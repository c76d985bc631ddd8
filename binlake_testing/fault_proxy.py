"""A loopback HTTP proxy that cuts response bodies: the real cause of a download dropped mid-body.

Put in front of the loopback S3 server (``binlake_testing.s3server``), it forwards every request
unchanged and, for the first ``cut_bodies`` GET responses with a body, sends the status line and
headers (the full ``Content-Length`` included) but only ``cut_after`` bytes of the body, then
closes the connection (``reset=True``: with a TCP RST). The client sees exactly what a dropped download looks like on the wire
(urllib3 ``IncompleteRead`` -> botocore ``ResponseStreamingError``), which no mock of a
``read()`` method reproduces faithfully. Why hand-written: the fault-injection proxies that exist
(toxiproxy, mitmproxy) are separate services or heavy dependencies; this is 100 lines of stdlib.
"""

from __future__ import annotations

import http.client
import socket
import struct
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

_HOP_BY_HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "te", "trailer"}


@dataclass(frozen=True)
class ProxiedRequest:
    """One request the proxy forwarded: its method, path, ``Range`` header and whether it was cut."""

    method: str
    path: str
    range: str | None
    cut: bool


@dataclass
class CutBodyProxy:
    """The proxy's settings, state and log; :meth:`start` binds 127.0.0.1 on a free port."""

    upstream: str
    cut_after: int = 1000
    cut_bodies: int = 1
    reset: bool = False
    requests: list[ProxiedRequest] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _server: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None

    @property
    def endpoint_url(self) -> str:
        assert self._server is not None, "proxy not started"
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> CutBodyProxy:
        proxy = self

        class Handler(_ForwardingHandler):
            owner = proxy

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="cut-body-proxy", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> CutBodyProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def take_cut(self, method: str, path: str, byte_range: str | None) -> bool:
        """Log a request; True when its body is to be cut."""
        with self._lock:
            cut = method == "GET" and self.cut_bodies > 0
            if cut:
                self.cut_bodies -= 1
            self.requests.append(ProxiedRequest(method, path, byte_range, cut))
            return cut


class _ForwardingHandler(BaseHTTPRequestHandler):
    owner: CutBodyProxy
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
        pass

    def _forward(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        up = urlsplit(self.owner.upstream)
        conn = http.client.HTTPConnection(up.hostname or "127.0.0.1", up.port or 80, timeout=30)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
        try:
            conn.request(self.command, self.path, body=body, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
        finally:
            conn.close()
        cut = self.owner.take_cut(self.command, self.path, self.headers.get("Range")) and len(data) > 0
        self.send_response(resp.status, resp.reason)
        for k, v in resp.getheaders():
            if k.lower() not in _HOP_BY_HOP and k.lower() != "content-length":
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command == "HEAD":
            return
        if not cut:
            self.wfile.write(data)
            return
        self.wfile.write(data[:self.owner.cut_after])
        self.wfile.flush()
        if self.owner.reset:  # RST: what a dropped connection looks like (unread bytes may be lost)
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.close_connection = True  # FIN before Content-Length is reached: IncompleteRead

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward
