"""binlog_parser: a pure (stdlib + zstandard) decoder of MySQL/MariaDB binary logs.

Bytes in, typed events out::

    from binlog_parser import read_events
    for event in read_events("binlog.000042"):
        print(event.name, event.header.pos, event.fields())

See ``docs/binlog_parser.md`` for the API, event classes, error model and CLI.
"""

from __future__ import annotations

from binlog_parser.constants import EventType, event_type_name
from binlog_parser.context import DecodeContext
from binlog_parser.errors import (
    BinlogError,
    ChecksumMismatchError,
    CorruptEventError,
    NotABinlogError,
    TruncatedEventError,
    UnsupportedVersionError,
)
from binlog_parser.events import (
    AnnotateRowsEvent,
    AppendBlockEvent,
    BinlogCheckpointEvent,
    DeleteFileEvent,
    Event,
    ExecLoadEvent,
    ExecuteLoadQueryEvent,
    FormatDescriptionEvent,
    GtidEvent,
    HeartbeatEvent,
    HeartbeatV2Event,
    IgnorableEvent,
    IncidentEvent,
    IntvarEvent,
    LargeTransactionHeaderEvent,
    LoadEvent,
    MariaGtidEvent,
    MariaGtidListEvent,
    PreviousGtidsEvent,
    QueryEvent,
    RandEvent,
    RotateEvent,
    RowsQueryEvent,
    StartEncryptionEvent,
    StartEventV3,
    StopEvent,
    TransactionContextEvent,
    TransactionPayloadEvent,
    UnknownEvent,
    UserVarEvent,
    ViewChangeEvent,
    XaPrepareEvent,
    XidEvent,
)
from binlog_parser.gtid import Gtid, GtidParseError, GtidSet, MariaGtid, MariaGtidList
from binlog_parser.header import EventHeader
from binlog_parser.reader import (
    DEFAULT_MAX_EVENT_SIZE,
    BinlogReader,
    SkippedBytes,
    read_events,
    read_format_description,
    read_records,
    scan_headers,
)

__all__ = [
    "AnnotateRowsEvent",
    "AppendBlockEvent",
    "BinlogCheckpointEvent",
    "BinlogError",
    "BinlogReader",
    "ChecksumMismatchError",
    "CorruptEventError",
    "DEFAULT_MAX_EVENT_SIZE",
    "DecodeContext",
    "DeleteFileEvent",
    "Event",
    "EventHeader",
    "EventType",
    "ExecLoadEvent",
    "ExecuteLoadQueryEvent",
    "FormatDescriptionEvent",
    "Gtid",
    "GtidEvent",
    "GtidParseError",
    "GtidSet",
    "HeartbeatEvent",
    "HeartbeatV2Event",
    "IgnorableEvent",
    "IncidentEvent",
    "IntvarEvent",
    "LargeTransactionHeaderEvent",
    "LoadEvent",
    "MariaGtid",
    "MariaGtidEvent",
    "MariaGtidList",
    "MariaGtidListEvent",
    "NotABinlogError",
    "PreviousGtidsEvent",
    "QueryEvent",
    "RandEvent",
    "RotateEvent",
    "RowsQueryEvent",
    "SkippedBytes",
    "StartEncryptionEvent",
    "StartEventV3",
    "StopEvent",
    "TransactionContextEvent",
    "TransactionPayloadEvent",
    "TruncatedEventError",
    "UnknownEvent",
    "UnsupportedVersionError",
    "UserVarEvent",
    "ViewChangeEvent",
    "XaPrepareEvent",
    "XidEvent",
    "event_type_name",
    "read_events",
    "read_format_description",
    "read_records",
    "scan_headers",
]
