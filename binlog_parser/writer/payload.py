"""TRANSACTION_PAYLOAD (40): a TLV header, then the transaction's events compressed with zstd.

Header fields as MySQL 8.0.20+ writes them (``Transaction_payload_event``): compression type (2),
uncompressed size (3), payload size (1), end mark (0); each as ``type, length, value`` packed
integers. The embedded events are full events (19-byte header, ``log_pos`` 0) without CRC32
trailers; the payload event itself gets one.
"""

from __future__ import annotations

from binlog_parser.wire import encode_packed_int

COMPRESSION_ZSTD = 0
COMPRESSION_NONE = 255


def _tlv(field: int, value: int) -> bytes:
    v = encode_packed_int(value)
    return encode_packed_int(field) + encode_packed_int(len(v)) + v


def transaction_payload_body(payload: bytes, uncompressed_size: int | None,
                             compression_type: int = COMPRESSION_ZSTD) -> bytes:
    head = _tlv(2, compression_type)
    if uncompressed_size is not None:
        head += _tlv(3, uncompressed_size)
    head += _tlv(1, len(payload)) + b"\x00"
    return head + payload


def compress_events(raw_events: bytes, level: int = 3) -> bytes:
    """zstd-compress the concatenated (checksum-less) events of one transaction."""
    import zstandard

    return zstandard.ZstdCompressor(level=level).compress(raw_events)
