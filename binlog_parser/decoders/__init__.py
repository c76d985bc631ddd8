"""Body decoders of the core event types, by type code.

Each decoder is ``(header, body, context) -> Event`` where ``body`` is the event after
its common header, checksum trailer removed (see ``binlog_parser.context.Decoder``).
Row events live in ``binlog_parser.rows`` and are merged in by the reader.
"""

from __future__ import annotations

from binlog_parser.constants import EventType as T
from binlog_parser.context import Decoder
from binlog_parser.decoders import control, gtid_events, mariadb, payload, statement

CORE_DECODERS: dict[int, Decoder] = {
    T.START_V3: control.decode_start_v3,
    T.QUERY: statement.decode_query,
    T.STOP: control.decode_stop,
    T.ROTATE: control.decode_rotate,
    T.INTVAR: statement.decode_intvar,
    T.LOAD: statement.decode_load,
    T.CREATE_FILE: statement.decode_create_file,
    T.APPEND_BLOCK: statement.decode_append_block,
    T.EXEC_LOAD: statement.decode_exec_load,
    T.DELETE_FILE: statement.decode_delete_file,
    T.NEW_LOAD: statement.decode_load,
    T.RAND: statement.decode_rand,
    T.USER_VAR: statement.decode_user_var,
    T.FORMAT_DESCRIPTION: control.decode_format_description,
    T.XID: control.decode_xid,
    T.BEGIN_LOAD_QUERY: statement.decode_append_block,
    T.EXECUTE_LOAD_QUERY: statement.decode_execute_load_query,
    T.INCIDENT: control.decode_incident,
    T.HEARTBEAT: control.decode_heartbeat,
    T.IGNORABLE: control.decode_ignorable,
    T.ROWS_QUERY: control.decode_rows_query,
    T.GTID: gtid_events.decode_gtid,
    T.ANONYMOUS_GTID: gtid_events.decode_gtid,
    T.PREVIOUS_GTIDS: gtid_events.decode_previous_gtids,
    T.GTID_TAGGED: gtid_events.decode_gtid_tagged,
    T.TRANSACTION_CONTEXT: gtid_events.decode_transaction_context,
    T.VIEW_CHANGE: gtid_events.decode_view_change,
    T.XA_PREPARE: gtid_events.decode_xa_prepare,
    T.TRANSACTION_PAYLOAD: payload.decode_transaction_payload,
    T.HEARTBEAT_V2: control.decode_heartbeat_v2,
    T.LARGE_TRANSACTION_HEADER: control.decode_large_transaction_header,
    T.MARIA_ANNOTATE_ROWS: mariadb.decode_annotate_rows,
    T.MARIA_BINLOG_CHECKPOINT: mariadb.decode_binlog_checkpoint,
    T.MARIA_GTID: mariadb.decode_maria_gtid,
    T.MARIA_GTID_LIST: mariadb.decode_maria_gtid_list,
    T.MARIA_START_ENCRYPTION: mariadb.decode_start_encryption,
    T.MARIA_QUERY_COMPRESSED: statement.decode_query_compressed,
}
