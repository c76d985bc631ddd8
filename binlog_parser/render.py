"""Rendering events: JSON objects (one per event) and a mysqlbinlog-like text view."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from binlog_parser.events import Event, to_json_value
from binlog_parser.rows import _native
from binlog_parser.rows.render import compact_json

MAX_SAFE_INT = 1 << 53

#: event class -> the extension's layout of its fields (None: encoded in Python)
_FIELDS_LAYOUTS: dict[type, Any] = {}


def event_fields_json(event: Event) -> str:
    """``compact_json(event.fields())``: the JSON text of an event's fields, as
    ``bronze.events.fields`` stores it.

    Why not always the encoder: on a small-event binlog the fields of GTID, QUERY and XID
    events are about a fifth of the ingest's CPU (issue 13). An event whose ``fields()`` is the
    default dataclass walk is written by the extension straight from its slots when it is
    built (``native/src/fields.rs``: None, bools, strs, ints, bytes and dicts, lists and tuples
    of them there, any other value through the encoder); ``tests/test_native_render.py`` holds
    it equal to the encoder on every fixture event."""
    layout = fields_layout(type(event))
    if layout is not None:
        text = _native.fields_json(event, layout)
        if text is not None:
            return text
    return compact_json(event.fields())


def fields_layout(cls: type) -> Any:
    """The extension's layout of the fields of an event class (:func:`event_fields_json`), or
    None: they are encoded in Python (no extension, or a ``fields()`` of the class's own)."""
    if cls.fields is not Event.fields:  # type: ignore[attr-defined]
        return None
    layout = _FIELDS_LAYOUTS.get(cls, _UNWALKED)
    if layout is _UNWALKED:
        layout = _FIELDS_LAYOUTS[cls] = _fields_layout(cls)
    return layout


_UNWALKED: Any = object()


def _value_json(value: Any) -> str:
    return compact_json(to_json_value(value))


def _fields_layout(cls: type) -> Any:
    names = [f.name for f in dataclasses.fields(cls)]
    if not names or names[0] != "header":
        return None
    return _native.fields_layout(cls, [compact_json({n: None})[1:-5] for n in names[1:]], _value_json)


def _safe(value: Any) -> Any:
    """Ints beyond 2**53 (JavaScript's exact range) as strings, recursively."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return str(value) if not -MAX_SAFE_INT <= value <= MAX_SAFE_INT else value
    if isinstance(value, dict):
        return {k: _safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_safe(v) for v in value]
    return value


def event_to_dict(event: Event, file: str | None, *, payload_next_pos: int | None = None) -> dict[str, Any]:
    """The JSON object of one event: the common header keys merged with ``event.fields()``.

    Events inside a TRANSACTION_PAYLOAD carry the payload's ``pos`` (and ``next_pos``
    when given), plus ``in_payload: true`` and their ``payload_offset`` inside it.
    """
    h = event.header
    if h.payload_pos is not None:
        pos = h.payload_pos
        next_pos = payload_next_pos if payload_next_pos is not None else h.payload_pos
    else:
        pos, next_pos = h.pos, h.next_pos
    out: dict[str, Any] = {
        "file": file,
        "pos": pos,
        "next_pos": next_pos,
        "type": event.name,
        "type_code": h.type_code,
        "timestamp": h.timestamp,
        "server_id": h.server_id,
        "event_size": h.event_size,
        "log_pos": h.log_pos,
        "flags": h.flags,
        "checksum_ok": h.checksum_ok,
    }
    if h.payload_pos is not None:
        out["in_payload"] = True
        out["payload_offset"] = h.pos
    if h.raw_type_code is not None:
        out["raw_type_code"] = h.raw_type_code
    for k, v in event.fields().items():
        if k in out:
            k = f"event_{k}"
        out[k] = v
    return _safe(out)


# ---------------------------------------------------------------------------
# Text view (mysqlbinlog-like)
# ---------------------------------------------------------------------------

_TEXT_NAMES = {
    "FORMAT_DESCRIPTION": "Start", "START_V3": "Start", "QUERY": "Query", "STOP": "Stop",
    "ROTATE": "Rotate", "INTVAR": "Intvar", "RAND": "Rand", "USER_VAR": "User_var",
    "XID": "Xid", "GTID": "GTID", "ANONYMOUS_GTID": "Anonymous_GTID",
    "GTID_TAGGED": "GTID_TAGGED", "PREVIOUS_GTIDS": "Previous-GTIDs",
    "TABLE_MAP": "Table_map", "WRITE_ROWS_V1": "Write_rows_v1", "UPDATE_ROWS_V1": "Update_rows_v1",
    "DELETE_ROWS_V1": "Delete_rows_v1", "WRITE_ROWS_V2": "Write_rows", "UPDATE_ROWS_V2": "Update_rows",
    "DELETE_ROWS_V2": "Delete_rows", "ROWS_QUERY": "Rows_query", "INCIDENT": "Incident",
    "TRANSACTION_PAYLOAD": "Transaction_Payload", "MARIA_GTID": "GTID",
    "MARIA_GTID_LIST": "Gtid list", "MARIA_BINLOG_CHECKPOINT": "Binlog checkpoint",
    "MARIA_ANNOTATE_ROWS": "Annotate_rows", "XA_PREPARE": "XA_prepare",
}


#: MariaDB GTID flags2 bits mysqlbinlog names after the GTID (log_event_client.cc)
_MARIA_GTID_FLAG_WORDS = ((32, "ddl"), (4, "trans"), (16, "waited"))


def _ts(t: int) -> str:
    g = time.gmtime(t)
    return f"{g.tm_year % 100:02d}{g.tm_mon:02d}{g.tm_mday:02d} {g.tm_hour:2d}:{g.tm_min:02d}:{g.tm_sec:02d}"


def _fields_text(fields: dict[str, Any]) -> str:
    """Other events' fields as mysqlbinlog prints header fields: ``\tname=value`` each (short ones)."""
    parts = [f"\t{k}={v}" for k, v in fields.items()
             if k != "body" and isinstance(v, (int, str, float)) and len(str(v)) < 200]
    return "".join(parts)


def event_to_text(event: Event) -> str:
    """A mysqlbinlog-style block: ``# at N``, the header comment line, then a summary."""
    h = event.header
    name = event.name
    f = event.fields() if not hasattr(event, "gtid_set") else {}
    at = f"# at {h.pos}" if h.payload_pos is None else f"# at {h.payload_pos} (payload offset {h.pos})"
    crc = "" if h.checksum_ok is None else (" CRC32 ok" if h.checksum_ok else " CRC32 MISMATCH")
    line = (f"#{_ts(h.timestamp)} server id {h.server_id}  end_log_pos {h.log_pos}{crc} \t"
            f"{_TEXT_NAMES.get(name, name)}")
    body = ""
    e: Any = event
    if name in ("FORMAT_DESCRIPTION", "START_V3"):
        # as mysqlbinlog: the header's time, "at startup" when the server set create_timestamp
        line += (f": binlog v {e.binlog_version}, server v {e.server_version} created {_ts(h.timestamp)}"
                 + (" at startup" if e.create_timestamp else ""))
        if name == "FORMAT_DESCRIPTION" and e.in_use:
            line += "\n# Warning: this binlog is either in use or was not closed properly."
    elif name in ("QUERY", "MARIA_QUERY_COMPRESSED", "EXECUTE_LOAD_QUERY"):
        line += f"\tthread_id={e.thread_id}\texec_time={e.exec_time}\terror_code={e.error_code}"
        use = f"use `{e.schema}`/*!*/;\n" if e.schema else ""
        body = f"{use}{e.query}\n/*!*/;"
    elif name == "ROTATE":
        line = line[:-len(_TEXT_NAMES["ROTATE"])] + f"Rotate to {e.next_file}  pos: {e.next_position}"
    elif name == "XID":
        line += f" = {e.xid}\nCOMMIT/*!*/;"
    elif name in ("GTID", "GTID_TAGGED", "ANONYMOUS_GTID"):
        line += (f"\tlast_committed={e.last_committed}\tsequence_number={e.sequence_number}"
                 f"\trbr_only={'no' if e.may_have_sbr else 'yes'}")
        for label, value in (("original_committed_timestamp", e.original_commit_timestamp),
                             ("immediate_commit_timestamp", e.immediate_commit_timestamp),
                             ("transaction_length", e.transaction_length)):
            if value is not None:  # absent before MySQL 8.0
                line += f"\t{label}={value}"
        body = f"SET @@SESSION.GTID_NEXT= '{e.gtid or 'ANONYMOUS'}'/*!*/;"
    elif name == "PREVIOUS_GTIDS":
        body = f"# {e.gtid_set or '[empty]'}"
    elif name == "MARIA_GTID_LIST":
        line += f" [{e.gtid_set}]"
    elif name == "MARIA_GTID":
        line += f" {e.gtid}" + (f" cid={e.commit_id}" if e.commit_id is not None else "")
        line += "".join(f" {word}" for bit, word in _MARIA_GTID_FLAG_WORDS if e.flags2 & bit)
        body = "START TRANSACTION" if not e.standalone else ""
    elif name == "MARIA_BINLOG_CHECKPOINT":
        line += f" {e.binlog_file}"
    elif name == "INTVAR":
        body = f"SET {e.intvar_name}={e.value}/*!*/;"
    elif name == "RAND":
        body = f"SET @@RAND_SEED1={e.seed1}, @@RAND_SEED2={e.seed2}/*!*/;"
    elif name == "USER_VAR":
        body = f"SET @`{e.var_name}`:={'NULL' if e.is_null else repr(e.value)}/*!*/;"
    elif name == "ROWS_QUERY":
        body = "# " + e.query.replace("\n", "\n# ")
    elif name == "MARIA_ANNOTATE_ROWS":
        line += ":"
        body = "#Q> " + e.query.replace("\n", "\n#Q> ")
    elif name == "INCIDENT":
        line += f" #{e.incident} ({e.incident_name}) {e.message}"
    elif name == "STOP":
        pass
    elif callable(getattr(event, "text_lines", None)):
        # rows events render their own ``### INSERT INTO ...`` lines (mysqlbinlog -v)
        if name == "TABLE_MAP":
            line += f": `{e.schema}`.`{e.table}` mapped to number {e.table_id}"
        elif getattr(e, "kind", None) in ("insert", "update", "delete"):
            line += f": table id {e.table_id}" + (" flags: STMT_END_F" if e.flags & 1 else "")
        body = "\n".join(e.text_lines())
    elif name == "TABLE_MAP":
        line += f": `{e.schema}`.`{e.table}` mapped to number {e.table_id}"
    elif name == "TRANSACTION_PAYLOAD":
        line += (f"\tpayload_size={e.payload_size}\tcompression_type={e.compression_name}"
                 f"\tuncompressed_size={e.uncompressed_size}")
    else:
        line += _fields_text(f)
    return f"{at}\n{line}" + (f"\n{body}" if body else "")
