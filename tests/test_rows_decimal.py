"""DECIMAL binary format -> exact Decimal, every precision/scale."""

from __future__ import annotations

import random
from decimal import Decimal

import pytest
from test_rows_values_property import ref_decimal2bin

from binlog_parser.rows.decimal import (
    decimal_binary_size,
    decimal_text,
    decode_decimal,
)


def encode_decimal(value: Decimal, precision: int, scale: int) -> bytes:
    """Test-side encoder for round trips: the property tests' decimal2bin from MySQL's spec."""
    sign = value.as_tuple().sign
    ip, _, fp = f"{value.copy_abs():.{scale}f}".partition(".")
    return ref_decimal2bin(value < 0 or (value == 0 and bool(sign)), ip.lstrip("0"), fp, precision, scale)


@pytest.mark.parametrize("value,precision,scale,text", [
    ("1234.56", 12, 2, "1234.56"),
    ("-0.01", 12, 2, "-0.01"),
    ("9999999999.99", 12, 2, "9999999999.99"),
    ("12.5", 65, 30, "12.500000000000000000000000000000"),
    ("-0.000000000000000000000000000001", 65, 30, "-0.000000000000000000000000000001"),
    ("0", 10, 0, "0"),
    ("-1234567890", 10, 0, "-1234567890"),
    ("99999999999999999999999999999999999999999999999999999999999999999", 65, 0,
     "99999999999999999999999999999999999999999999999999999999999999999"),
    ("0.5", 1, 1, "0.5"),
    ("-123456789.123456789", 18, 9, "-123456789.123456789"),
])
def test_known_values(value, precision, scale, text):
    data = encode_decimal(Decimal(value), precision, scale)
    assert len(data) == decimal_binary_size(precision, scale)
    got = decode_decimal(data, precision, scale)
    assert isinstance(got, Decimal)
    assert decimal_text(got, scale) == text
    assert got == Decimal(value) and got.as_tuple().exponent == -scale


def test_mysql_reference_bytes():
    # DECIMAL(10,4) 1234.5678 and -1234.5678 (bytes as the server writes them)
    assert str(decode_decimal(bytes.fromhex("8004d2162e"), 10, 4)) == "1234.5678"
    assert str(decode_decimal(bytes.fromhex("7ffb2de9d1"), 10, 4)) == "-1234.5678"


def test_random_round_trips():
    rnd = random.Random(7)
    for _ in range(400):
        precision = rnd.randint(1, 65)
        scale = rnd.randint(0, min(30, precision))
        intg = precision - scale
        ip = "".join(rnd.choice("0123456789") for _ in range(rnd.randint(0, intg))) or "0"
        fp = "".join(rnd.choice("0123456789") for _ in range(scale))
        text = ("-" if rnd.random() < 0.5 else "") + ip + ("." + fp if scale else "")
        value = Decimal(text)
        got = decode_decimal(encode_decimal(value, precision, scale), precision, scale)
        assert got == value
        assert decimal_text(got, scale) == decimal_text(value, scale)
