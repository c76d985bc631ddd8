"""moto's S3 writes made atomic: its ``If-None-Match`` / ``If-Match`` check and the write after it.

moto 5.2.5 serves a conditional ``PUT`` (and ``CompleteMultipartUpload``) by checking for the key
(``S3Response.put_object``: ``get_object`` then, a few dozen lines later, ``backend.put_object``)
with no lock between the two, on one thread per request. Two writers racing on one key can both
pass the check: measured with 8 threads x 200 rounds of ``PUT If-None-Match: *`` on one key and a
1 µs GIL switch interval, 8 rounds had two winners (and moto itself failed some requests with
"I/O operation on closed file" as one write closed the other's buffer). With the default 5 ms
interval no double winner showed in 400 rounds, but nothing forbids it. AWS S3 and MinIO decide
conditional writes atomically; binlake's commit protocol relies on that, so its tests must not
run against a server that can let two writers win.

:func:`install` wraps moto's object-level request handler so that requests that change objects
(``PUT``, ``POST``, ``DELETE``) run one at a time within the server process; reads stay concurrent.
Why a patch and not another server: no S3-API server on PyPI that is as light as moto to start in
a test (MinIO is a Go binary, not a Python package). Idempotent; applies to the calling process
(``S3Server`` calls it in thread mode, and runs ``python -m binlake_testing.moto_atomic`` in
process mode).
"""

from __future__ import annotations

import functools
import sys
import threading
from typing import Any

_WRITES = frozenset({"PUT", "POST", "DELETE"})
_lock = threading.RLock()
_installed = False


def install() -> None:
    """Serialise moto's object writes in this process (once)."""
    global _installed
    with _lock:
        if _installed:
            return
        from moto.s3.responses import S3Response

        original = S3Response.key_response

        @functools.wraps(original)
        def key_response(self: Any, request: Any, full_url: str, headers: dict[str, Any]) -> Any:
            if getattr(request, "method", "GET").upper() in _WRITES:
                with _lock:
                    return original(self, request, full_url, headers)
            return original(self, request, full_url, headers)

        S3Response.key_response = key_response  # type: ignore[method-assign]
        _installed = True


def main(argv: list[str] | None = None) -> None:
    """``python -m binlake_testing.moto_atomic <moto.server arguments>``: moto's server, patched."""
    install()
    from moto.server import main as moto_main

    moto_main(sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    main()
