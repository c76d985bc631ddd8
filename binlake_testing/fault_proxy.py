"""A loopback HTTP proxy that cuts response bodies: the real cause of a download dropped mid-body.

Put in front of the loopback S3 server (``binlake_testing.s3server``), it forwards every request
unchanged and, for the first ``cut_bodies`` GET responses with a body, sends the status line and
headers (the full ``Content-Length`` included) but only ``cut_after`` bytes of the body, then
closes the connection (``reset=True``: with a TCP RST). The client sees exactly what a dropped download looks like on the wire
(urllib3 ``IncompleteRead`` -> botocore ``ResponseStreamingError``), which no mock of a
``read()`` method reproduces faithfully. Why hand-written: the fault-injection proxies that exist
(toxiproxy, mitmproxy) are separate services or heavy dependencies; this is 100 lines of stdlib.

S3 faults for the commit campaign (``tests/test_commit_campaign.py``, ``bench/commit_campaign.py``),
all off by default and drawn from one seeded generator: ``fail_rate`` answers a request with
``503 SlowDown`` without forwarding it (the write did not happen); ``fail_after_rate`` forwards a
``PUT`` / ``POST`` and then answers ``500 InternalError`` (the write happened, its answer is lost:
the client retries a write that is already there); ``delay_rate`` holds a PUT or POST whose path
matches ``delay_paths`` for ``delay_seconds`` before forwarding it (a slow request, which also
widens any check-then-put window). Each logged request carries its ``If-None-Match`` / ``If-Match``
header, the status the client saw and the fault applied.
"""

from __future__ import annotations

import http.client
import random
import re
import socket
import struct
import threading
import time
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
    #: the request's If-None-Match or If-Match header (a conditional write), else None
    condition: str | None = None
    #: the status the client was sent
    status: int = 0
    #: "" or the injected fault: "503-before", "500-after", "delay"
    fault: str = ""


@dataclass
class CutBodyProxy:
    """The proxy's settings, state and log; :meth:`start` binds 127.0.0.1 on a free port."""

    upstream: str
    cut_after: int = 1000
    cut_bodies: int = 1
    reset: bool = False
    requests: list[ProxiedRequest] = field(default_factory=list)
    fail_rate: float = 0.0
    fail_after_rate: float = 0.0
    delay_rate: float = 0.0
    delay_seconds: tuple[float, float] = (0.0, 0.0)
    delay_paths: str = ""
    seed: int | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _random: random.Random = field(default_factory=random.Random)
    _server: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None

    @property
    def endpoint_url(self) -> str:
        assert self._server is not None, "proxy not started"
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> CutBodyProxy:
        proxy = self
        if self.seed is not None:
            self._random.seed(self.seed)

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

    def draw_fault(self, method: str, path: str) -> tuple[str, float]:
        """The fault for one request ("" for none) and the seconds to hold it first."""
        with self._lock:
            r = self._random
            delay = 0.0
            if (self.delay_rate and self.delay_paths and method in ("PUT", "POST") and re.search(self.delay_paths, path)
                    and r.random() < self.delay_rate):
                delay = r.uniform(*self.delay_seconds)
            if self.fail_rate and r.random() < self.fail_rate:
                return "503-before", delay
            if self.fail_after_rate and method in ("PUT", "POST") and r.random() < self.fail_after_rate:
                return "500-after", delay
            return ("delay" if delay else ""), delay

    def note(self, method: str, path: str, condition: str | None, status: int, fault: str) -> None:
        """Log a request the proxy answered (faults included)."""
        with self._lock:
            self.requests.append(ProxiedRequest(method, path, None, False, condition, status, fault))


class _ForwardingHandler(BaseHTTPRequestHandler):
    owner: CutBodyProxy
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
        pass

    def _send_error(self, status: int, code: str, message: str) -> None:
        body = b"" if self.command == "HEAD" else (
            f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code><Message>{message}</Message>'
            f"<Resource>{self.path}</Resource><RequestId>binlake-fault</RequestId></Error>").encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if body:
            self.wfile.write(body)

    def _upstream(self, body: bytes | None, *, timeout: float) -> tuple[http.client.HTTPResponse, bytes]:
        """This request, forwarded unchanged (less hop-by-hop headers); the answer and its whole body."""
        up = urlsplit(self.owner.upstream)
        conn = http.client.HTTPConnection(up.hostname or "127.0.0.1", up.port or 80, timeout=timeout)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
        try:
            conn.request(self.command, self.path, body=body, headers=headers)
            resp = conn.getresponse()
            return resp, resp.read()
        finally:
            conn.close()

    def _send_head(self, resp: http.client.HTTPResponse, data: bytes) -> None:
        """The upstream answer's status line and headers, with the Content-Length of what follows."""
        self.send_response(resp.status, resp.reason)
        for k, v in resp.getheaders():
            if k.lower() not in _HOP_BY_HOP and k.lower() != "content-length":
                self.send_header(k, v)
        # a HEAD's Content-Length is the object's size (no body follows): pass it on as it is
        self.send_header("Content-Length", resp.getheader("Content-Length", "0") if self.command == "HEAD" else str(len(data)))
        self.end_headers()

    def _forward(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        owner = self.owner
        if owner.fail_rate or owner.fail_after_rate or owner.delay_rate:
            self._forward_with_faults(body)
            return
        resp, data = self._upstream(body, timeout=30)
        cut = self.owner.take_cut(self.command, self.path, self.headers.get("Range")) and len(data) > 0
        self._send_head(resp, data)
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

    def _forward_with_faults(self, body: bytes | None) -> None:
        """The fault-campaign path: maybe hold, maybe fail before or after forwarding, else forward."""
        owner = self.owner
        condition = self.headers.get("If-None-Match") or self.headers.get("If-Match")
        fault, delay = owner.draw_fault(self.command, self.path)
        if delay:
            time.sleep(delay)
        if fault == "503-before":
            owner.note(self.command, self.path, condition, 503, fault)
            self._send_error(503, "SlowDown", "Please reduce your request rate.")
            return
        resp, data = self._upstream(body, timeout=60)
        if fault == "500-after":
            owner.note(self.command, self.path, condition, 500, fault)
            self._send_error(500, "InternalError", "We encountered an internal error. Please try again.")
            return
        owner.note(self.command, self.path, condition, resp.status, fault)
        self._send_head(resp, data)
        if self.command != "HEAD":
            self.wfile.write(data)

    def _forward_quietly(self) -> None:
        try:
            self._forward()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client gave up on a held request: what a real server sees too

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward_quietly
