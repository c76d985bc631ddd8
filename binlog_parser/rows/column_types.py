"""Column type codes as TABLE_MAP carries them, and the per-type metadata layout.

Source: MySQL ``libs/mysql/binlog/event/rows_event.h`` (column type table) and
``sql/log_event.cc`` (``log_event_print_value``, ``is_numeric_type``, ``is_character_type``).
"""

from __future__ import annotations

import enum


class ColumnType(enum.IntEnum):
    DECIMAL = 0
    TINY = 1
    SHORT = 2
    LONG = 3
    FLOAT = 4
    DOUBLE = 5
    NULL = 6
    TIMESTAMP = 7
    LONGLONG = 8
    INT24 = 9
    DATE = 10
    TIME = 11
    DATETIME = 12
    YEAR = 13
    NEWDATE = 14
    VARCHAR = 15
    BIT = 16
    TIMESTAMP2 = 17
    DATETIME2 = 18
    TIME2 = 19
    TYPED_ARRAY = 20
    VECTOR = 242
    INVALID = 243
    BOOL = 244
    JSON = 245
    NEWDECIMAL = 246
    ENUM = 247
    SET = 248
    TINY_BLOB = 249
    MEDIUM_BLOB = 250
    LONG_BLOB = 251
    BLOB = 252
    VAR_STRING = 253
    STRING = 254
    GEOMETRY = 255


def type_name(code: int) -> str:
    try:
        return ColumnType(code).name
    except ValueError:
        return f"UNKNOWN_{code}"


# Types whose SIGNEDNESS bit is logged (MySQL/MariaDB is_numeric_type).
NUMERIC_TYPES = frozenset({ColumnType.TINY, ColumnType.SHORT, ColumnType.INT24, ColumnType.LONG,
                           ColumnType.LONGLONG, ColumnType.NEWDECIMAL, ColumnType.FLOAT,
                           ColumnType.DOUBLE})
# MariaDB also logs a SIGNEDNESS bit for YEAR (a Field_tiny subclass there); MySQL does not.
MARIADB_NUMERIC_TYPES = NUMERIC_TYPES | {ColumnType.YEAR}
#: bytes of each integer column type in a row image
INTEGER_SIZES: dict[ColumnType, int] = {ColumnType.TINY: 1, ColumnType.SHORT: 2, ColumnType.INT24: 3,
                                       ColumnType.LONG: 4, ColumnType.LONGLONG: 8}
# Types counted by DEFAULT_CHARSET / COLUMN_CHARSET (on the *real* type: CHAR-typed ENUM/SET are
# excluded). MySQL 9 adds VECTOR; MariaDB counts GEOMETRY (a BLOB subclass there).
_CHARACTER_BASE = frozenset({ColumnType.STRING, ColumnType.VAR_STRING, ColumnType.VARCHAR,
                             ColumnType.BLOB, ColumnType.TINY_BLOB, ColumnType.MEDIUM_BLOB,
                             ColumnType.LONG_BLOB})
MYSQL_CHARACTER_TYPES = _CHARACTER_BASE | {ColumnType.VECTOR}
MARIADB_CHARACTER_TYPES = _CHARACTER_BASE | {ColumnType.GEOMETRY}
ENUM_SET_TYPES = frozenset({ColumnType.ENUM, ColumnType.SET})

# Bytes of per-column metadata in TABLE_MAP's metadata block.
_META_LEN: dict[int, int] = {
    ColumnType.FLOAT: 1, ColumnType.DOUBLE: 1, ColumnType.BLOB: 1, ColumnType.TINY_BLOB: 1,
    ColumnType.MEDIUM_BLOB: 1, ColumnType.LONG_BLOB: 1, ColumnType.GEOMETRY: 1, ColumnType.JSON: 1,
    ColumnType.VECTOR: 1, ColumnType.TIMESTAMP2: 1, ColumnType.DATETIME2: 1, ColumnType.TIME2: 1,
    ColumnType.VARCHAR: 2, ColumnType.VAR_STRING: 2, ColumnType.BIT: 2, ColumnType.NEWDECIMAL: 2,
    ColumnType.STRING: 2, ColumnType.ENUM: 2, ColumnType.SET: 2,
}


def read_column_metadata(types: bytes, block: bytes | memoryview) -> list[int]:
    """Split TABLE_MAP's metadata block into one integer per column.

    Two-byte metadata is returned as MySQL's ``table_def::field_metadata`` does: VARCHAR /
    VAR_STRING / BIT little-endian (``byte0 | byte1 << 8``; for BIT byte0 = bits % 8 and
    byte1 = whole bytes), NEWDECIMAL / STRING / ENUM / SET as ``(byte0 << 8) | byte1``.
    Raises ValueError when the block is too short.
    """
    metas: list[int] = []
    pos = 0
    for t in types:
        if t == ColumnType.TYPED_ARRAY:
            # first byte: element type; then that type's metadata
            if pos >= len(block):
                raise ValueError(f"metadata block of {len(block)} bytes ends before the element type "
                                 f"of a TYPED_ARRAY column")
            elem = block[pos]
            pos += 1
            n = _META_LEN.get(elem, 0)
            if n == 0:
                metas.append(0)
                continue
            t = elem
        else:
            n = _META_LEN.get(t, 0)
        if n == 0:
            metas.append(0)
            continue
        if pos + n > len(block):
            raise ValueError(f"metadata block of {len(block)} bytes ends inside the {n}-byte metadata of "
                             f"column {len(metas) + 1} ({type_name(t)})")
        if n == 1:
            metas.append(block[pos])
        elif t in (ColumnType.VARCHAR, ColumnType.VAR_STRING, ColumnType.BIT):
            # little-endian: VARCHAR max length; BIT (bits % 8) | (bytes << 8)
            metas.append(block[pos] | (block[pos + 1] << 8))
        else:
            metas.append((block[pos] << 8) | block[pos + 1])
        pos += n
    return metas


def string_real_type_and_length(meta: int) -> tuple[int, int]:
    """For a STRING column: (real type (STRING/ENUM/SET), max byte length / pack length).

    Long CHAR columns (> 255 bytes) fold the high length bits into byte0 (MySQL bug #37426).
    """
    if meta >= 256:
        byte0 = meta >> 8
        byte1 = meta & 0xFF
        if (byte0 & 0x30) != 0x30:
            return byte0 | 0x30, byte1 | (((byte0 & 0x30) ^ 0x30) << 4)
        return byte0, byte1
    return ColumnType.STRING, meta
