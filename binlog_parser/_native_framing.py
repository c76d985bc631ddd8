"""The seam to the compiled framing loop (``binlog_parser._native_ext.EventTypes.frames``).

On binlogs of small events the Python framing loop (common header, sizes, CRC32, the
``EventHeader``, dispatch, then the GTID / QUERY / XID bodies) cost as much as the rows. The
extension runs that loop over the bytes :class:`~binlog_parser.framing.EventFramer` holds, for
as long as the events are plain, and stops *before* anything else: an event not wholly held,
a size or CRC32 that does not check out, a FORMAT_DESCRIPTION / START_EVENT_V3 / payload to
expand, ``stop_position``, a decoder that fails. The Python loop then frames that one event
(asks for data, raises the exact error, applies the FORMAT_DESCRIPTION...) and asks for the
compiled loop again. Bodies are decoded by the framer's ``dispatch`` as in Python; GTID, XID,
QUERY, known rows events and TABLE_MAPs found in ``DecodeContext.table_map_cache`` are decoded
in the extension when ``dispatch`` holds the standard decoder for them, and events whose decoder
is ``decode_header_only`` (``scan_headers``) are built there without calling Python.

Used when the extension is built and switched on (``BINLAKE_NATIVE``,
``binlog_parser.rows._native.use_native``); see docs/native.md.
"""

from __future__ import annotations

from typing import Any

from binlog_parser._native_loader import active_extension
from binlog_parser.decoders.control import decode_xid
from binlog_parser.decoders.gtid_events import decode_gtid
from binlog_parser.decoders.header_only import HeaderOnlyEvent, decode_header_only
from binlog_parser.decoders.statement import decode_query
from binlog_parser.events import GtidEvent, QueryEvent, UnknownEvent, XidEvent
from binlog_parser.header import EventHeader
from binlog_parser.rows.rows_event import RowsEvent, decode_rows_event
from binlog_parser.rows.table_map import TableMapEvent, decode_table_map

_built: dict[int, Any] = {}  # id(extension module) -> its EventTypes (built once)


def event_types() -> Any | None:
    """The extension's ``EventTypes`` (whose ``frames(...)`` runs the compiled loop) when the
    extension is in use, else None: the Python loop frames every event."""
    module = active_extension()
    if module is None:
        return None
    key = id(module)
    if key not in _built:
        try:
            _built[key] = module.EventTypes(
                (EventHeader, GtidEvent, XidEvent, QueryEvent, RowsEvent, TableMapEvent, HeaderOnlyEvent),
                (decode_gtid, decode_xid, decode_query, decode_rows_event, decode_table_map,
                 decode_header_only),
                UnknownEvent.from_body)
        except (TypeError, ValueError):  # a slot layout it does not know: the Python loop
            _built[key] = None
    return _built[key]
