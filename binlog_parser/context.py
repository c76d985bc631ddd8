"""Decoding state carried from event to event within one file."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from binlog_parser._native_ext import EventSink
    from binlog_parser.events import Event
    from binlog_parser.header import EventHeader


@dataclass
class DecodeContext:
    """What the FORMAT_DESCRIPTION (or START_V3 / v1 rules) said, plus open TABLE_MAPs.

    Mutable on purpose: a relay log can carry several FORMAT_DESCRIPTIONs, and TABLE_MAP
    events define ``table_id``s used by the rows events after them. To decode from an
    offset inside a file, build the context from that file's FORMAT_DESCRIPTION
    (see ``binlog_parser.reader``).
    """

    binlog_version: int = 4
    server_version: str = ""
    header_length: int = 19
    post_header_lengths: bytes = b""
    checksum_alg: int = 0  # CHECKSUM_OFF / CHECKSUM_CRC32
    file: str | None = None
    table_maps: dict[int, Any] = field(default_factory=dict)  # table_id -> TableMapEvent
    schemas: Any = None  # optional user-supplied column names (rows decoding)
    # pre-GA 5.1/5.2 "-a_drop" servers: on-disk type code -> standard type code
    event_type_permutation: tuple[int, ...] | None = None
    # the reader's max_event_size (None = the default): caps decompressed sizes in decoders
    max_event_size: int | None = None
    # decoded TABLE_MAPs by body bytes (a server repeats the same TABLE_MAP before every
    # transaction on a table): a repeat reuses the columns and per-column value decoders
    table_map_cache: dict[bytes, Any] = field(default_factory=dict, repr=False, compare=False)
    # with the compiled extension: rows events' images kept as their bytes, decoded when first
    # read (``RowsEvent.rows`` is then the extension's ``RowImages`` sequence), for a caller that
    # renders them without reading their values (the ingest: ``ImageRenderer.render_changes_into``)
    rows_as_bytes: bool = field(default=False, compare=False)
    # with the compiled extension: a hook for a caller that wants the top-level events of plain
    # transactions as rows in its own buffers rather than as event objects: an ``EventSink``
    # (``binlog_parser.rows._native.event_sink``) the compiled framing loop offers those events to,
    # yielding only the ones it declines. The parser never looks inside it; the buffers' columns
    # are the caller's (the extension's ``SINK_LAYOUT``)
    event_sink: EventSink | None = field(default=None, compare=False, repr=False)

    @property
    def is_mariadb(self) -> bool:
        return "mariadb" in self.server_version.lower()

    def post_header_length(self, type_code: int) -> int:
        """Post-header length for a type, from the FORMAT_DESCRIPTION array (0 if absent)."""
        idx = type_code - 1
        if 0 <= idx < len(self.post_header_lengths):
            return self.post_header_lengths[idx]
        return 0


# A body decoder: (header, body without the common header and checksum, context) -> Event.
Decoder = Callable[["EventHeader", memoryview, DecodeContext], "Event"]
