"""binlog_parser.writer: emit MySQL 8.0 / 8.4 / 9.x binlog files (the decoder's inverse).

Pure (stdlib + zstandard), sans-I/O beyond the stream it is given::

    from binlog_parser.writer import BinlogFileWriter, Column, Table

    users = Table("app", "users", (Column("id", "BIGINT UNSIGNED", nullable=False, primary_key=True),
                                   Column("name", "VARCHAR(64)")), table_id=90)
    with open("binlog.000001", "wb") as f:
        w = BinlogFileWriter(f, server_version="8.0.40", server_id=1, previous_gtids="")
        w.begin_transaction("3e11fa47-71ca-11e1-9e33-c80aa9429562:1", last_committed=0,
                            sequence_number=1, timestamp=1700000000)
        w.write_rows(users, [{"id": 1, "name": "ada"}])
        w.xid()
        w.rotate("binlog.000002")

``encode_event(event)`` re-encodes any event the reader decoded (FORMAT_DESCRIPTION,
PREVIOUS_GTIDS, GTID / GTID_TAGGED / ANONYMOUS_GTID, QUERY, XID, ROTATE, STOP, INTVAR, RAND,
ROWS_QUERY, INCIDENT, TRANSACTION_PAYLOAD, TABLE_MAP, rows v2) to the bytes the server wrote.
See ``docs/writer.md``.
"""

from __future__ import annotations

from binlog_parser.errors import EncodeError, ValueEncodeError
from binlog_parser.writer.decimal import encode_decimal
from binlog_parser.writer.events import (
    encode_body,
    encode_event,
    format_description_body,
    frame_event,
    gtid_body,
    gtid_tagged_body,
    post_header_lengths,
    previous_gtids_body,
    query_body,
    rotate_body,
    xid_body,
)
from binlog_parser.writer.file import (
    BinlogFileWriter,
    default_status_vars,
    write_binlog_bytes,
)
from binlog_parser.writer.json_binary import encode_json
from binlog_parser.writer.payload import compress_events, transaction_payload_body
from binlog_parser.writer.rows import (
    Column,
    RowsEncoder,
    Table,
    column_layout,
    table_map_body,
)
from binlog_parser.writer.values import make_encoder

__all__ = [
    "BinlogFileWriter", "Column", "EncodeError", "RowsEncoder", "Table", "ValueEncodeError",
    "column_layout", "compress_events", "default_status_vars", "encode_body", "encode_decimal",
    "encode_event", "encode_json", "format_description_body", "frame_event", "gtid_body",
    "gtid_tagged_body", "make_encoder", "post_header_lengths", "previous_gtids_body",
    "query_body", "rotate_body", "table_map_body", "transaction_payload_body",
    "write_binlog_bytes", "xid_body",
]
