"""Resource limits against hostile input: sizes read from a binlog are claims, not facts.

Every count or length a decoder reads is checked against the bytes actually present before
anything is allocated; decompression is capped both by the claimed size and by a sane bound
(the reader's ``max_event_size``), so a lying header can never make the parser allocate, loop
or decompress more than the input (and the configured limits) allow. See
``docs/binlog_parser.md`` ("Hostile input").
"""

from __future__ import annotations

import zlib

#: Default cap on one event's size: MySQL's max_allowed_packet ceiling (1 GiB) plus headroom.
DEFAULT_MAX_EVENT_SIZE = (1 << 30) + (1 << 20)

#: MySQL's JSON_DOCUMENT_MAX_DEPTH: the server refuses deeper documents, so a binary JSON
#: value nested deeper than this is corrupt (and would otherwise recurse without bound).
JSON_MAX_DEPTH = 100

#: Deflate's theoretical maximum expansion is 1032:1 (a 2-bit code per 258-byte match); a
#: zlib stream claiming more output than this per input byte is lying.
ZLIB_MAX_RATIO = 1032


def effective_max_event_size(ctx: object) -> int:
    """The ``max_event_size`` a decoder must honour (the reader stores it on the context)."""
    v = getattr(ctx, "max_event_size", None)
    return v if isinstance(v, int) and v > 0 else DEFAULT_MAX_EVENT_SIZE


def bounded_zlib_decompress(data: bytes | memoryview, claimed: int, limit: int) -> bytes:
    """Inflate ``data``, which a header says decompresses to exactly ``claimed`` bytes.

    Raises ``ValueError`` (before decompressing) when the claim exceeds ``limit`` or what
    deflate can produce from ``len(data)`` bytes; never produces more than ``claimed + 1``
    bytes whatever the stream holds (a decompression bomb stops at the claim); raises
    ``ValueError`` when the output is not exactly ``claimed`` bytes (or ``zlib.error``).
    """
    if claimed < 0 or claimed > limit:
        raise ValueError(f"compressed block claims {claimed} bytes uncompressed (limit {limit})")
    if claimed > len(data) * ZLIB_MAX_RATIO + 64:
        raise ValueError(f"compressed block of {len(data)} bytes cannot inflate to the "
                         f"{claimed} bytes its header claims")
    d = zlib.decompressobj()
    out = d.decompress(bytes(data), claimed + 1)
    if len(out) != claimed:
        raise ValueError(f"compressed block: {len(out)}{'+' if len(out) > claimed else ''} bytes, "
                         f"header says {claimed}")
    return out
