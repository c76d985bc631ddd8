"""MySQL's TLV "codecs/binary" header used by TRANSACTION_PAYLOAD and HEARTBEAT_V2.

A sequence of ``type, length, value`` where type and length are packed integers
(net_field_length); type 0 ends the header. Numeric values are packed integers;
``raw_fields`` are taken as ``length`` raw bytes. Unknown fields are skipped.
"""

from __future__ import annotations

from binlog_parser.errors import CorruptEventError
from binlog_parser.wire import packed_int


def decode_tlv(body: memoryview | bytes, raw_fields: frozenset[int] = frozenset({1}),
               numeric_fields: frozenset[int] | None = None) -> dict[int, object]:
    """Decode until the end mark (or the end of the body); returns ``{field: value}``
    and ``{-1: offset after the end mark}``."""
    out: dict[int, object] = {}
    off = 0
    n = len(body)
    while off < n:
        ftype, off = packed_int(body, off)
        if ftype is None:
            raise CorruptEventError("NULL field type in TLV header")
        if ftype == 0:
            out[-1] = off
            return out
        length, off = packed_int(body, off)
        if length is None or off + length > n:
            raise CorruptEventError(f"TLV field {ftype} of length {length} runs past the event")
        if ftype in raw_fields and (numeric_fields is None or ftype not in numeric_fields):
            out[ftype] = bytes(body[off:off + length])
            off += length
        elif numeric_fields is None or ftype in numeric_fields:
            value, end = packed_int(body, off)
            out[ftype] = value
            off = max(end, off + length) if length else end
        else:
            off += length
    out[-1] = off
    return out
