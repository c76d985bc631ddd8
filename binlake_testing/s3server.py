"""A real S3-API server on loopback (moto in server mode) for the demo and the tests.

Why a server and not ``mock_aws``: Spark's S3A connector (JVM) and boto3 must both talk to the
same bucket over HTTP, exactly as they would to AWS or MinIO, so the plumbing under test is the
production plumbing. Only 127.0.0.1 is ever bound.
"""

from __future__ import annotations

import logging
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from binlake.errors import BinlakeError
from binlake_testing.processes import wait_or_kill

# Dummy credentials: moto accepts anything, and setting them keeps boto3/S3A from looking for
# real ones (and from ever sending real ones to the loopback server).
DUMMY_AWS_ENV: dict[str, str] = {
    "AWS_ACCESS_KEY_ID": "binlake-test",
    "AWS_SECRET_ACCESS_KEY": "binlake-test-secret",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
}


def free_port(host: str = "127.0.0.1") -> int:
    """A currently free TCP port on ``host``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


@dataclass
class S3Server:
    """moto server on 127.0.0.1. ``mode="thread"`` (in-process) or ``"process"`` (``python -m moto.server``).

    Use as a context manager, or call :meth:`start` / :meth:`stop`.
    """

    mode: str = "thread"
    host: str = "127.0.0.1"
    port: int = 0
    #: ``mode="process"`` only: a file for the server's request log (one line per request), to count
    #: what a run asks of the object store (bench/fleet.py ``--s3-log``)
    request_log: str | None = None
    _thread_server: Any = field(default=None, init=False, repr=False)
    _proc: subprocess.Popen[bytes] | None = field(default=None, init=False, repr=False)

    @property
    def endpoint_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self, timeout: float = 30.0) -> S3Server:
        if not self.host.startswith("127.") and self.host != "localhost":
            raise ValueError("the test S3 server only binds loopback addresses")
        try:
            import moto.server  # noqa: F401 - only to say clearly when the testing extra is missing
        except ImportError:
            raise BinlakeError("the loopback S3 server needs moto, part of the testing extra: "
                               "pip install 'binlake[testing]'") from None
        if self.mode == "thread":
            from moto.server import ThreadedMotoServer

            from binlake_testing.moto_atomic import install

            install()  # conditional writes decided atomically, as S3 does (moto_atomic's docstring)

            # werkzeug logs every request at INFO; keep the demo and test output readable.
            logging.getLogger("werkzeug").setLevel(logging.ERROR)

            server = ThreadedMotoServer(ip_address=self.host, port=self.port, verbose=False)
            server.start()
            self.port = server.get_host_and_port()[1]
            self._thread_server = server
        elif self.mode == "process":
            self.port = self.port or free_port(self.host)
            log = open(self.request_log, "ab") if self.request_log else None  # noqa: SIM115 - the child holds it
            try:
                self._proc = subprocess.Popen(
                    [sys.executable, "-m", "binlake_testing.moto_atomic", "-H", self.host, "-p", str(self.port)],
                    stdout=subprocess.DEVNULL, stderr=log or subprocess.DEVNULL,
                )
            finally:
                if log is not None:
                    log.close()
        else:
            raise ValueError(f"unknown mode {self.mode!r}")
        self._wait_ready(timeout)
        return self

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(self.endpoint_url + "/moto-api/", timeout=2):
                    return
            except urllib.error.HTTPError:
                return  # it answered
            except OSError:
                if self._proc is not None and self._proc.poll() is not None:
                    raise RuntimeError("moto server process exited during start-up") from None
                if time.monotonic() > deadline:
                    self.stop()
                    raise TimeoutError(f"moto server not ready at {self.endpoint_url}") from None
                time.sleep(0.1)

    def stop(self) -> None:
        if self._thread_server is not None:
            self._thread_server.stop()
            self._thread_server = None
        if self._proc is not None:
            self._proc.terminate()
            wait_or_kill(self._proc, 10)
            self._proc = None

    def reset(self) -> None:
        """Drop every bucket and object (moto's reset API)."""
        req = urllib.request.Request(self.endpoint_url + "/moto-api/reset", method="POST")
        with urllib.request.urlopen(req, timeout=10):
            pass

    def env(self) -> dict[str, str]:
        """Env vars pointing boto3 and binlake at this server with dummy credentials."""
        return {**DUMMY_AWS_ENV, "BINLAKE_S3_ENDPOINT": self.endpoint_url, "AWS_ENDPOINT_URL_S3": self.endpoint_url}

    def client(self) -> Any:
        """A boto3 S3 client for this server (dummy credentials)."""
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint_url,
            region_name=DUMMY_AWS_ENV["AWS_DEFAULT_REGION"],
            aws_access_key_id=DUMMY_AWS_ENV["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=DUMMY_AWS_ENV["AWS_SECRET_ACCESS_KEY"],
        )

    def __enter__(self) -> S3Server:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
