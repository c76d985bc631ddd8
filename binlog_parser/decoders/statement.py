"""Statement events: QUERY (+ MariaDB compressed QUERY), INTVAR, RAND, USER_VAR, and
the LOAD DATA family (LOAD, NEW_LOAD, CREATE_FILE, APPEND_BLOCK, EXEC_LOAD,
DELETE_FILE, BEGIN_LOAD_QUERY, EXECUTE_LOAD_QUERY)."""

from __future__ import annotations

import zlib
from typing import Any

from binlog_parser.constants import EventType
from binlog_parser.context import DecodeContext
from binlog_parser.decoders.common import (
    F64,
    I64,
    U16,
    U32,
    U64,
    decode_decimal,
    need,
    nul_string,
    text,
)
from binlog_parser.errors import CorruptEventError
from binlog_parser.events import (
    AppendBlockEvent,
    DeleteFileEvent,
    Event,
    ExecLoadEvent,
    ExecuteLoadQueryEvent,
    IntvarEvent,
    LoadEvent,
    QueryEvent,
    RandEvent,
    UserVarEvent,
)
from binlog_parser.header import EventHeader
from binlog_parser.limits import bounded_zlib_decompress, effective_max_event_size
from binlog_parser.rows.charsets import charset_of, make_text_decoder

# ---------------------------------------------------------------------------
# QUERY status variables (statement_events.h Q_* codes; MariaDB's from 128)
# ---------------------------------------------------------------------------

Q_FLAGS2_CODE = 0
Q_SQL_MODE_CODE = 1
Q_CATALOG_CODE = 2
Q_AUTO_INCREMENT = 3
Q_CHARSET_CODE = 4
Q_TIME_ZONE_CODE = 5
Q_CATALOG_NZ_CODE = 6
Q_LC_TIME_NAMES_CODE = 7
Q_CHARSET_DATABASE_CODE = 8
Q_TABLE_MAP_FOR_UPDATE_CODE = 9
Q_MASTER_DATA_WRITTEN_CODE = 10
Q_INVOKER = 11
Q_UPDATED_DB_NAMES = 12
Q_MICROSECONDS = 13
Q_COMMIT_TS = 14
Q_COMMIT_TS2 = 15
Q_EXPLICIT_DEFAULTS_FOR_TIMESTAMP = 16
Q_DDL_LOGGED_WITH_XID = 17
Q_DEFAULT_COLLATION_FOR_UTF8MB4 = 18
Q_SQL_REQUIRE_PRIMARY_KEY = 19
Q_DEFAULT_TABLE_ENCRYPTION = 20
# MariaDB
Q_HRNOW = 128
Q_XID = 129
Q_GTID_FLAGS3 = 130
Q_CHARACTER_SET_COLLATIONS = 131

OVER_MAX_DBS_IN_EVENT_MTS = 254

def _u(b: memoryview, off: int, n: int) -> int:
    if off + n > len(b):
        raise CorruptEventError(f"status variable runs past the status block ({off}+{n} > {len(b)})")
    return int.from_bytes(b[off:off + n], "little")


def _lstr(b: memoryview, off: int) -> tuple[str, int]:
    n = _u(b, off, 1)
    off += 1
    if off + n > len(b):
        raise CorruptEventError("status variable string runs past the status block")
    return text(b[off:off + n]), off + n


#: Status variables that are one little-endian unsigned integer: code -> (name, bytes).
_FIXED_STATUS_VARS: dict[int, tuple[str, int]] = {
    Q_FLAGS2_CODE: ("flags2", 4),
    Q_SQL_MODE_CODE: ("sql_mode", 8),
    Q_LC_TIME_NAMES_CODE: ("lc_time_names", 2),
    Q_CHARSET_DATABASE_CODE: ("charset_database", 2),
    Q_TABLE_MAP_FOR_UPDATE_CODE: ("table_map_for_update", 8),
    Q_MASTER_DATA_WRITTEN_CODE: ("master_data_written", 4),
    Q_MICROSECONDS: ("microseconds", 3),
    Q_COMMIT_TS: ("commit_ts", 8),
    Q_COMMIT_TS2: ("commit_ts2", 8),
    Q_DDL_LOGGED_WITH_XID: ("ddl_xid", 8),
    Q_DEFAULT_COLLATION_FOR_UTF8MB4: ("default_collation_for_utf8mb4", 2),
    Q_SQL_REQUIRE_PRIMARY_KEY: ("sql_require_primary_key", 1),
    Q_DEFAULT_TABLE_ENCRYPTION: ("default_table_encryption", 1),
    Q_HRNOW: ("hrnow", 3),
    Q_XID: ("xid", 8),
    Q_GTID_FLAGS3: ("gtid_flags3", 1),
}


def decode_status_vars(sv: memoryview, is_mariadb: bool = False) -> tuple[dict[str, Any], int | None]:
    """Decode a QUERY status-variable block. Returns (vars by name, first unknown code)."""
    out: dict[str, Any] = {}
    off = 0
    n = len(sv)
    while off < n:
        code = sv[off]
        off += 1
        fixed = _FIXED_STATUS_VARS.get(code)
        if fixed is not None:
            name, size = fixed
            out[name] = _u(sv, off, size)
            off += size
        else:
            after = _decode_shaped_status_var(sv, off, code, out)
            if after is None:
                # unknown code: its length is unknown, the rest cannot be parsed (as the server)
                return out, code
            off = after
        if off > n:
            raise CorruptEventError("status variables run past their block")
    return out, None


def _decode_shaped_status_var(sv: memoryview, off: int, code: int, out: dict[str, Any]) -> int | None:
    """Decode one status variable of another shape into ``out``: the offset after it, or None
    for an unknown code."""
    if code == Q_CATALOG_CODE:
        out["catalog"], off = _lstr(sv, off)
        return off + 1  # trailing NUL
    if code == Q_AUTO_INCREMENT:
        out["auto_increment"] = {"increment": _u(sv, off, 2), "offset": _u(sv, off + 2, 2)}
        return off + 4
    if code == Q_CHARSET_CODE:
        out["charset"] = {"client": _u(sv, off, 2), "connection": _u(sv, off + 2, 2),
                          "server": _u(sv, off + 4, 2)}
        return off + 6
    if code == Q_TIME_ZONE_CODE:
        out["time_zone"], off = _lstr(sv, off)
        return off
    if code == Q_CATALOG_NZ_CODE:
        out["catalog"], off = _lstr(sv, off)
        return off
    if code == Q_INVOKER:
        user, off = _lstr(sv, off)
        host, off = _lstr(sv, off)
        out["invoker"] = {"user": user, "host": host}
        return off
    if code == Q_UPDATED_DB_NAMES:
        return _decode_updated_db_names(sv, off, out)
    if code == Q_EXPLICIT_DEFAULTS_FOR_TIMESTAMP:
        out["explicit_defaults_ts"] = bool(_u(sv, off, 1))
        return off + 1
    if code == Q_CHARACTER_SET_COLLATIONS:
        count = _u(sv, off, 1)
        off += 1
        pairs = []
        for _ in range(count):
            pairs.append({"charset": _u(sv, off, 2), "collation": _u(sv, off + 2, 2)})
            off += 4
        out["character_set_collations"] = pairs
        return off
    return None


def _decode_updated_db_names(sv: memoryview, off: int, out: dict[str, Any]) -> int:
    count = _u(sv, off, 1)
    off += 1
    names: list[str] | None = []
    if count == OVER_MAX_DBS_IN_EVENT_MTS:
        names = None
    else:
        for _ in range(count):
            end = bytes(sv[off:]).find(b"\x00")
            if end < 0:
                raise CorruptEventError("updated_db_names entry without a NUL")
            names.append(text(sv[off:off + end]))  # type: ignore[union-attr]
            off += end + 1
    out["updated_db_names"] = names
    return off


def _decode_query_like(h: EventHeader, body: memoryview, ctx: DecodeContext,
                       type_code: int) -> tuple[int, int, int, str, memoryview, dict, int | None, int]:
    ph = ctx.post_header_length(type_code)
    if ph < 11:
        ph = 13 if ctx.binlog_version >= 4 else 11
    need(body, ph, "QUERY post-header")
    thread_id = U32.unpack_from(body, 0)[0]
    exec_time = U32.unpack_from(body, 4)[0]
    db_len = body[8]
    error_code = U16.unpack_from(body, 9)[0]
    sv_len = U16.unpack_from(body, 11)[0] if ph >= 13 else 0
    off = ph
    if off + sv_len > len(body):
        raise CorruptEventError(f"status variables ({sv_len} bytes) run past the event")
    status, unknown = decode_status_vars(body[off:off + sv_len], ctx.is_mariadb)
    off += sv_len
    if off + db_len + 1 > len(body):
        raise CorruptEventError(f"schema name ({db_len} bytes) runs past the event")
    schema = text(body[off:off + db_len])
    off += db_len + 1  # NUL
    return thread_id, exec_time, error_code, schema, body[off:], status, unknown, ph


def decode_query(h: EventHeader, body: memoryview, ctx: DecodeContext) -> Event:
    thread_id, exec_time, error_code, schema, q, status, unknown, _ = _decode_query_like(
        h, body, ctx, EventType.QUERY)
    return QueryEvent(h, thread_id, exec_time, error_code, schema, text(q), status, unknown)


def mariadb_uncompress(data: memoryview | bytes, limit: int = 1 << 30) -> bytes:
    """MariaDB's binlog_buf_uncompress: header byte 0x80|alg<<4|lenlen, big-endian length, zlib.

    The claimed length must be <= ``limit`` and within deflate's reach of the bytes present;
    output is capped at the claim (a decompression bomb stops there)."""
    if not data:
        raise CorruptEventError("empty compressed block")
    first = data[0]
    if not first & 0x80:
        raise CorruptEventError(f"compressed block header 0x{first:02x} lacks the 0x80 marker")
    alg = (first & 0x70) >> 4
    lenlen = first & 0x07
    if alg != 0 or not 1 <= lenlen <= 4 or len(data) < 1 + lenlen:
        raise CorruptEventError(f"unsupported compressed block header 0x{first:02x}")
    size = int.from_bytes(bytes(data[1:1 + lenlen]), "big")
    try:
        return bounded_zlib_decompress(data[1 + lenlen:], size, limit)
    except zlib.error as exc:
        raise CorruptEventError(f"zlib: {exc}") from exc
    except ValueError as exc:
        raise CorruptEventError(str(exc)) from exc


def decode_query_compressed(h: EventHeader, body: memoryview, ctx: DecodeContext) -> Event:
    thread_id, exec_time, error_code, schema, q, status, unknown, _ = _decode_query_like(
        h, body, ctx, EventType.MARIA_QUERY_COMPRESSED)
    raw = mariadb_uncompress(q, effective_max_event_size(ctx))
    return QueryEvent(h, thread_id, exec_time, error_code, schema, text(raw),
                      status, unknown, True)


def decode_execute_load_query(h: EventHeader, body: memoryview, ctx: DecodeContext) -> Event:
    ph = ctx.post_header_length(EventType.EXECUTE_LOAD_QUERY)
    need(body, 26, "EXECUTE_LOAD_QUERY post-header")
    thread_id, exec_time, error_code, schema, q, status, unknown, ph = _decode_query_like(
        h, body, ctx, EventType.EXECUTE_LOAD_QUERY)
    file_id = U32.unpack_from(body, 13)[0]
    start = U32.unpack_from(body, 17)[0]
    end = U32.unpack_from(body, 21)[0]
    dup = body[25]
    return ExecuteLoadQueryEvent(h, thread_id, exec_time, error_code, schema, text(q), status,
                                 file_id, start, end, dup, unknown)


# ---------------------------------------------------------------------------
# INTVAR, RAND, USER_VAR
# ---------------------------------------------------------------------------

INTVAR_NAMES = {0: "INVALID_INT", 1: "LAST_INSERT_ID", 2: "INSERT_ID"}


def decode_intvar(h: EventHeader, body: memoryview, ctx: DecodeContext) -> Event:
    ph = ctx.post_header_length(EventType.INTVAR)
    need(body, ph + 9, "INTVAR")
    t = body[ph]
    return IntvarEvent(h, t, INTVAR_NAMES.get(t, f"UNKNOWN_{t}"), U64.unpack_from(body, ph + 1)[0])


def decode_rand(h: EventHeader, body: memoryview, ctx: DecodeContext) -> Event:
    ph = ctx.post_header_length(EventType.RAND)
    need(body, ph + 16, "RAND")
    return RandEvent(h, U64.unpack_from(body, ph)[0], U64.unpack_from(body, ph + 8)[0])


ITEM_RESULT_NAMES = {0: "STRING", 1: "REAL", 2: "INT", 3: "ROW", 4: "DECIMAL"}
UNSIGNED_F = 0x01
BINARY_CHARSET = 63


def _user_var_text(raw: bytes, collation: int) -> str | bytes:
    """A string user variable: text decoded with its collation's charset (latin1 bytes C3 A9
    are "Ã©", ucs2 00 E9 is "é"); bytes for binary, an unknown charset or invalid bytes."""
    if collation == BINARY_CHARSET:
        return raw
    dec = make_text_decoder(charset_of(collation))
    return dec(raw) if dec is not None else raw


def decode_user_var(h: EventHeader, body: memoryview, ctx: DecodeContext) -> Event:
    off = ctx.post_header_length(EventType.USER_VAR)
    need(body, off + 5, "USER_VAR")
    name_len = U32.unpack_from(body, off)[0]
    off += 4
    if off + name_len + 1 > len(body):
        raise CorruptEventError(f"USER_VAR name of {name_len} bytes runs past the event")
    name = text(body[off:off + name_len])
    off += name_len
    is_null = bool(body[off])
    off += 1
    if is_null:
        return UserVarEvent(h, name, True, None, None, None, None, False, None)
    need(body, off + 9, "USER_VAR value header")
    vtype = body[off]
    charset = U32.unpack_from(body, off + 1)[0]
    vlen = U32.unpack_from(body, off + 5)[0]
    off += 9
    if off + vlen > len(body):
        raise CorruptEventError(f"USER_VAR value of {vlen} bytes runs past the event")
    raw = body[off:off + vlen]
    off += vlen
    flags = body[off] if off < len(body) else None
    unsigned = bool(flags is not None and flags & UNSIGNED_F)
    value: Any
    if vtype == 0:  # STRING_RESULT: the bytes are in the value's own charset (not UTF-8)
        value = _user_var_text(bytes(raw), charset)
    elif vtype == 1:  # REAL_RESULT
        if vlen != 8:
            raise CorruptEventError(f"USER_VAR REAL of {vlen} bytes")
        value = F64.unpack_from(raw, 0)[0]
    elif vtype == 2:  # INT_RESULT
        if vlen != 8:
            raise CorruptEventError(f"USER_VAR INT of {vlen} bytes")
        value = U64.unpack_from(raw, 0)[0] if unsigned else I64.unpack_from(raw, 0)[0]
    elif vtype == 4:  # DECIMAL_RESULT
        if vlen < 2:
            raise CorruptEventError("USER_VAR DECIMAL without precision/scale")
        value = decode_decimal(raw[2:], raw[0], raw[1])
    else:
        value = bytes(raw)
    return UserVarEvent(h, name, False, vtype, ITEM_RESULT_NAMES.get(vtype, f"UNKNOWN_{vtype}"),
                        charset, value, unsigned, flags)


# ---------------------------------------------------------------------------
# LOAD DATA family
# ---------------------------------------------------------------------------


def _decode_load_body(h: EventHeader, body: memoryview, ctx: DecodeContext, load_ph_at: int,
                      data_at: int, new_format: bool) -> tuple[LoadEvent, int]:
    """Shared by LOAD, NEW_LOAD and CREATE_FILE: the 18-byte LOAD post-header at
    ``load_ph_at``, the variable part at ``data_at``. Returns (event, end offset)."""
    need(body, load_ph_at + 18, "LOAD post-header")
    thread_id = U32.unpack_from(body, load_ph_at)[0]
    exec_time = U32.unpack_from(body, load_ph_at + 4)[0]
    skip_lines = U32.unpack_from(body, load_ph_at + 8)[0]
    table_len = body[load_ph_at + 12]
    db_len = body[load_ph_at + 13]
    num_fields = U32.unpack_from(body, load_ph_at + 14)[0]
    off = data_at
    b = bytes(body)
    if new_format:
        seps = []
        for _ in range(5):
            n = b[off]
            seps.append(b[off + 1:off + 1 + n])
            off += 1 + n
        opt_flags = b[off]
        off += 1
        empty_flags = 0
    else:
        seps = [b[off + i:off + i + 1] for i in range(5)]
        opt_flags = b[off + 5]
        empty_flags = b[off + 6]
        off += 7
    if num_fields > len(b) - off:
        raise CorruptEventError(f"LOAD claims {num_fields} fields")
    lens = b[off:off + num_fields]
    off += num_fields
    names = []
    for ln in lens:
        names.append(text(b[off:off + ln]))
        off += ln + 1
    table = text(b[off:off + table_len])
    off += table_len + 1
    schema = text(b[off:off + db_len])
    off += db_len + 1
    if off > len(b):
        raise CorruptEventError("LOAD body runs past the event")
    end = b.find(b"\x00", off)
    if end < 0:
        fname, off = b[off:], len(b)
    else:
        fname, off = b[off:end], end + 1
    ev = LoadEvent(h, thread_id, exec_time, skip_lines, schema, table, text(fname), tuple(names),
                   seps[0], seps[1], seps[2], seps[3], seps[4], opt_flags, empty_flags)
    return ev, off


def decode_load(h: EventHeader, body: memoryview, ctx: DecodeContext) -> Event:
    ph = ctx.post_header_length(h.type_code) or 18
    ev, _ = _decode_load_body(h, body, ctx, 0, ph, h.type_code != EventType.LOAD)
    return ev


def decode_create_file(h: EventHeader, body: memoryview, ctx: DecodeContext) -> Event:
    load_ph = ctx.post_header_length(EventType.LOAD) or 18
    cf_ph = ctx.post_header_length(EventType.CREATE_FILE)
    if ctx.binlog_version == 1:
        ev, end = _decode_load_body(h, body, ctx, 0, load_ph, False)
        return ev
    need(body, load_ph + 4, "CREATE_FILE post-header")
    file_id = U32.unpack_from(body, load_ph)[0]
    ev, end = _decode_load_body(h, body, ctx, 0, load_ph + cf_ph, True)
    return LoadEvent(h, ev.thread_id, ev.exec_time, ev.skip_lines, ev.schema, ev.table, ev.file_name,
                     ev.field_names, ev.field_term, ev.enclosed_by, ev.line_term, ev.line_start,
                     ev.escaped_by, ev.opt_flags, ev.empty_flags, file_id, bytes(body[end:]))


def decode_append_block(h: EventHeader, body: memoryview, ctx: DecodeContext) -> Event:
    ph = ctx.post_header_length(h.type_code) or 4
    need(body, 4, "APPEND_BLOCK")
    return AppendBlockEvent(h, U32.unpack_from(body, 0)[0], bytes(body[ph:]))


def decode_exec_load(h: EventHeader, body: memoryview, ctx: DecodeContext) -> Event:
    need(body, 4, "EXEC_LOAD")
    return ExecLoadEvent(h, U32.unpack_from(body, 0)[0])


def decode_delete_file(h: EventHeader, body: memoryview, ctx: DecodeContext) -> Event:
    need(body, 4, "DELETE_FILE")
    return DeleteFileEvent(h, U32.unpack_from(body, 0)[0])


_ = nul_string
