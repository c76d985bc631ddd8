"""Event type codes and header flags, as numbered by the MySQL and MariaDB servers.

Source: MySQL ``libs/mysql/binlog/event/binlog_event.h`` (Log_event_type) and
MariaDB ``sql/log_event.h``.
"""

from __future__ import annotations

import enum


class EventType(enum.IntEnum):
    """Every event type code a MySQL (3.23 to 9.7) or MariaDB server writes."""

    UNKNOWN = 0
    START_V3 = 1
    QUERY = 2
    STOP = 3
    ROTATE = 4
    INTVAR = 5
    LOAD = 6
    SLAVE = 7
    CREATE_FILE = 8
    APPEND_BLOCK = 9
    EXEC_LOAD = 10
    DELETE_FILE = 11
    NEW_LOAD = 12
    RAND = 13
    USER_VAR = 14
    FORMAT_DESCRIPTION = 15
    XID = 16
    BEGIN_LOAD_QUERY = 17
    EXECUTE_LOAD_QUERY = 18
    TABLE_MAP = 19
    PRE_GA_WRITE_ROWS = 20
    PRE_GA_UPDATE_ROWS = 21
    PRE_GA_DELETE_ROWS = 22
    WRITE_ROWS_V1 = 23
    UPDATE_ROWS_V1 = 24
    DELETE_ROWS_V1 = 25
    INCIDENT = 26
    HEARTBEAT = 27
    IGNORABLE = 28
    ROWS_QUERY = 29
    WRITE_ROWS_V2 = 30
    UPDATE_ROWS_V2 = 31
    DELETE_ROWS_V2 = 32
    GTID = 33
    ANONYMOUS_GTID = 34
    PREVIOUS_GTIDS = 35
    TRANSACTION_CONTEXT = 36
    VIEW_CHANGE = 37
    XA_PREPARE = 38
    PARTIAL_UPDATE_ROWS = 39
    TRANSACTION_PAYLOAD = 40
    HEARTBEAT_V2 = 41
    GTID_TAGGED = 42
    LARGE_TRANSACTION_HEADER = 43
    # MariaDB
    MARIA_ANNOTATE_ROWS = 160
    MARIA_BINLOG_CHECKPOINT = 161
    MARIA_GTID = 162
    MARIA_GTID_LIST = 163
    MARIA_START_ENCRYPTION = 164
    MARIA_QUERY_COMPRESSED = 165
    MARIA_WRITE_ROWS_COMPRESSED_V1 = 166
    MARIA_UPDATE_ROWS_COMPRESSED_V1 = 167
    MARIA_DELETE_ROWS_COMPRESSED_V1 = 168
    MARIA_WRITE_ROWS_COMPRESSED = 169
    MARIA_UPDATE_ROWS_COMPRESSED = 170
    MARIA_DELETE_ROWS_COMPRESSED = 171


_EVENT_TYPE_NAMES = {int(t): t.name for t in EventType}


def event_type_name(type_code: int) -> str:
    """The enum name for a code, or ``UNKNOWN_<code>`` for a code no server defines."""
    name = _EVENT_TYPE_NAMES.get(type_code)
    if name is not None and type(type_code) is int:
        return name
    try:
        return EventType(type_code).name
    except ValueError:
        return f"UNKNOWN_{type_code}"


# Common-header flags (binlog_event.h).
LOG_EVENT_BINLOG_IN_USE_F = 0x0001
LOG_EVENT_THREAD_SPECIFIC_F = 0x0004
LOG_EVENT_SUPPRESS_USE_F = 0x0008
LOG_EVENT_ARTIFICIAL_F = 0x0020
LOG_EVENT_RELAY_LOG_F = 0x0040
LOG_EVENT_IGNORABLE_F = 0x0080
LOG_EVENT_SKIP_REPLICATION_F = 0x8000

BINLOG_MAGIC = b"\xfebin"

# Checksum algorithms carried in FORMAT_DESCRIPTION (5.6.1+).
CHECKSUM_OFF = 0
CHECKSUM_CRC32 = 1
CHECKSUM_UNDEFINED = 255
