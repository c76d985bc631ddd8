"""User-supplied schemas (names when binlog_row_metadata is not FULL) and charset decoding."""

from __future__ import annotations

import json

from binlog_parser.rows.charsets import charset_of, make_text_decoder
from binlog_parser.rows.schema import SchemaRegistry, lookup_columns


def test_create_and_alter_ddl():
    reg = SchemaRegistry()
    assert reg.add_ddl("""CREATE TABLE IF NOT EXISTS `shop`.`orders` (
        `id` BIGINT NOT NULL AUTO_INCREMENT,
        customer_id INT UNSIGNED,
        amount DECIMAL(65,30),
        status ENUM('new','paid','it''s') DEFAULT 'new',
        tags SET('a','b'),
        note VARCHAR(10) CHARACTER SET latin1,
        raw VARBINARY(8),
        PRIMARY KEY (`id`), KEY k (customer_id)
    ) ENGINE=InnoDB""")
    cols = reg.get("shop", "orders")
    assert [c.name for c in cols] == ["id", "customer_id", "amount", "status", "tags", "note", "raw"]
    assert cols[0].unsigned is False and cols[1].unsigned is True
    assert cols[3].enum_values == ("new", "paid", "it's") and cols[4].set_values == ("a", "b")
    assert cols[5].charset == "latin1" and cols[6].charset == "binary"
    assert reg.add_ddl("ALTER TABLE orders ADD COLUMN channel VARCHAR(8) DEFAULT 'web' AFTER status", "shop")
    assert [c.name for c in reg.get("shop", "orders")][3:5] == ["status", "channel"]
    assert reg.add_ddl("ALTER TABLE shop.orders DROP COLUMN raw")
    assert lookup_columns(reg, "shop", "orders", 7) is not None
    assert lookup_columns(reg, "shop", "orders", 8) is None  # stale schema: ignored, not misapplied
    assert not reg.add_ddl("CREATE TABLE t (a INT)")  # no schema known


def test_json_file_and_plain_dict(tmp_path):
    p = tmp_path / "schemas.json"
    p.write_text(json.dumps({"db.t": ["a", {"name": "b", "unsigned": True}]}))
    reg = SchemaRegistry()
    reg.load_json(str(p))
    assert [c.name for c in reg.get("db", "t")] == ["a", "b"] and reg.get("db", "t")[1].unsigned
    assert [c.name for c in lookup_columns({"db.t": ["x", "y"]}, "db", "t", 2)] == ["x", "y"]


def test_charsets():
    assert charset_of(45) == "utf8mb4" and charset_of(255) == "utf8mb4" and charset_of(2304) == "utf8mb4"
    assert charset_of(8) == "latin1" and charset_of(33) == "utf8mb3" and charset_of(63) == "binary"
    assert charset_of(9999) is None and charset_of(None) is None
    assert make_text_decoder("binary") is None and make_text_decoder(None) is None
    assert make_text_decoder("latin1")(b"caf\xe9 \x80\x81") == "café €\x81"
    assert make_text_decoder("utf8mb4")("🐬".encode()) == "🐬"
    assert make_text_decoder("utf8mb4")(b"\xff") == b"\xff"  # invalid: raw bytes, never replaced
    assert make_text_decoder("ucs2")("é".encode("utf-16-be")) == "é"
    assert make_text_decoder("sjis")("日本".encode("shift_jis")) == "日本"
