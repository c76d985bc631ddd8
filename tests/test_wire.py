"""binlog_parser.wire and binlog_parser.serialization primitives."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from binlog_parser.serialization import (
    read_varlen_signed,
    read_varlen_unsigned,
    write_varlen_signed,
    write_varlen_unsigned,
)
from binlog_parser.wire import ShortBufferError, cstring, encode_packed_int, packed_int, uint, uint16, uint32, uint64


@pytest.mark.parametrize(
    "raw, value, size",
    [
        ("00", 0, 1),
        ("fa", 250, 1),
        ("fc0501", 261, 3),  # the seed's GTID transaction_length: 0xFC + 05 01 = 261
        ("fcfb00", 251, 3),
        ("fcffff", 0xFFFF, 3),
        ("fd000001", 0x010000, 4),
        ("fdffffff", 0xFFFFFF, 4),
        ("fe0000000001000000", 1 << 32, 9),
        ("feffffffffffffffff", (1 << 64) - 1, 9),
    ],
)
def test_packed_int_seed_table(raw: str, value: int, size: int) -> None:
    buf = bytes.fromhex(raw)
    assert packed_int(buf, 0) == (value, size)


def test_packed_int_null_and_errors() -> None:
    assert packed_int(b"\xfb", 0) == (None, 1)
    with pytest.raises(ShortBufferError):
        packed_int(b"\xff", 0)
    with pytest.raises(ShortBufferError):
        packed_int(b"\xfc\x01", 0)
    with pytest.raises(ShortBufferError):
        packed_int(b"", 0)


@given(st.integers(min_value=0, max_value=(1 << 64) - 1))
def test_packed_int_roundtrip(v: int) -> None:
    enc = encode_packed_int(v)
    assert packed_int(enc, 0) == (v, len(enc))


def test_fixed_ints() -> None:
    buf = bytes.fromhex("2d103568" "4f000000")  # seed GTID header: timestamp, event size
    assert uint32(buf, 0) == 1748308013
    assert uint32(buf, 4) == 79
    assert uint16(b"\x14\x01", 0) == 276
    assert uint64(bytes.fromhex("0c00000000000000"), 0) == 12
    assert uint(bytes.fromhex("c6551bae133606"), 0, 7) == 1748308013569478
    with pytest.raises(ShortBufferError):
        uint(b"\x00", 0, 2)


def test_cstring() -> None:
    assert cstring(b"abc\x00def", 0) == (b"abc", 4)
    assert cstring(b"abc", 0) == (b"abc", 3)


def test_varlen_readme_examples() -> None:
    # libs/mysql/serialization/readme.md: 65535 -> "00000111 11111111 11111011" (BE display)
    assert write_varlen_unsigned(65535) == bytes([0b11111011, 0b11111111, 0b00000111])
    assert write_varlen_signed(65535) == bytes([0b11110011, 0b11111111, 0b00001111])
    assert write_varlen_signed(-65535) == bytes([0b11101011, 0b11111111, 0b00001111])
    assert write_varlen_signed(-65536) == bytes([0b11111011, 0b11111111, 0b00001111])
    # the seed's tagged PREVIOUS_GTIDS: tag length byte 0x0a = 5 characters
    assert read_varlen_unsigned(b"\x0a", 0) == (5, 1)


@given(st.integers(min_value=0, max_value=(1 << 64) - 1))
def test_varlen_unsigned_roundtrip(v: int) -> None:
    enc = write_varlen_unsigned(v)
    assert len(enc) <= 9
    assert read_varlen_unsigned(enc, 0) == (v, len(enc))


@given(st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1))
def test_varlen_signed_roundtrip(v: int) -> None:
    enc = write_varlen_signed(v)
    assert read_varlen_signed(enc, 0) == (v, len(enc))


def test_varlen_short() -> None:
    with pytest.raises(ShortBufferError):
        read_varlen_unsigned(b"\x03\x00", 0)  # says 3 bytes, has 2
