"""Synthetic binlog archives with known ground truth (tests, demos, benchmarks).

``generate(dest, SyntheticConfig(...))`` simulates N MySQL source servers running a workload
(``oltp``: sysbench-like read/write mix; ``ddl``: DDL-heavy; ``blob``: large JSON / BLOB rows),
writes each server's binlog chain with :mod:`binlog_parser.writer` (rotating at
``max_binlog_size``) into ``dest/<source>/binlog.NNNNNN`` - a local folder or an ``s3://`` prefix
(through :mod:`binlake.lake.storage`) - and returns (and writes to ``dest/ground_truth.json``) what a
correct pipeline must find.

Fault switches (:class:`Faults`), each applied to the first source only so the others stay clean
references:

=================  =====================================================================  ============
switch             what the archive shows                                                 expected
=================  =====================================================================  ============
``missing_file``   a middle file is not uploaded                                          next file GAP
``gno_gap``        a GNO executed on the server is absent from a file                     that file GAP
``duplicate_file`` a file uploaded a second time under ``<name>.copy``                    copy DUPLICATE
``restart``        a file ends with STOP; the next one starts after a server restart      OK
``chain_break``    the server is replaced (STOP, new UUIDs, empty GTID history) and the   next file
                   series goes on in the same prefix                                      CHAIN_BREAK
``truncated_tail`` the last file is cut inside its last event                             OK (truncated)
``corrupted_tail`` a byte of the last transaction's GTID event is flipped (CRC mismatch)  OK (corrupt)
``in_use_last``    the last file has no ROTATE/STOP and keeps the in-use flag             OK (in use)
``uuids``          transactions of several UUIDs (replicated from other sources)          OK
``tags``           some transactions carry tagged GTIDs (8.4+ format)                     OK
=================  =====================================================================  ============

The ground truth per file: name, previous_gtids, GTIDs contained (and readable), closing event,
in-use flag, truncated/corrupted, transactions and row changes per table; per source: expected
reconciliation status per file (``OK`` / ``GAP`` with the missing set / ``DUPLICATE`` with the
original), the GTIDs executed and the GTIDs readable from the archive, and row changes per table
readable from the archive (duplicates counted once, lost / cut / corrupt transactions excluded).

Run ``python -m binlake_testing.synthetic --help`` (or ``binlake generate``).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import io
import json
import os
import random
import sys
import time
import uuid as _uuid
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from binlake.config import is_s3_uri, load_config
from binlake.lake.storage import open_object_store
from binlog_parser.gtid import Gtid, GtidSet
from binlog_parser.server_version import server_version_split
from binlog_parser.writer import BinlogFileWriter, Column, Table

FAULT_NAMES = ("missing_file", "gno_gap", "duplicate_file", "restart", "chain_break",
               "truncated_tail", "corrupted_tail", "in_use_last")


@dataclass
class Faults:
    missing_file: bool = False
    gno_gap: bool = False
    duplicate_file: bool = False
    restart: bool = False
    chain_break: bool = False
    truncated_tail: bool = False
    corrupted_tail: bool = False
    in_use_last: bool = False

    @classmethod
    def parse(cls, text: str | Iterable[str] | None) -> Faults:
        names = [n.strip() for n in (text.split(",") if isinstance(text, str) else (text or ()))
                 if n.strip()]
        if names == ["all"]:
            names = list(FAULT_NAMES)
        unknown = set(names) - set(FAULT_NAMES)
        if unknown:
            raise ValueError(f"unknown fault(s) {sorted(unknown)}; known: {', '.join(FAULT_NAMES)}")
        return cls(**{n: True for n in names})

    def enabled(self) -> list[str]:
        return [n for n in FAULT_NAMES if getattr(self, n)]


@dataclass
class SyntheticConfig:
    servers: int = 1
    #: bytes of binlog per server (approximate: generation stops at the first rotation past it)
    bytes_per_server: int = 1 << 20
    max_binlog_size: int = 256 << 10
    workload: str = "oltp"  # oltp | ddl | blob
    seed: int = 1
    server_version: str = "8.0.40"
    compression: bool = False
    uuids: int = 1  # GTID UUIDs per source (the server's own + replicated ones)
    tags: tuple[str, ...] = ()
    faults: Faults = field(default_factory=Faults)
    start_time: int = 1_700_000_000
    #: GNOs already executed (and purged) before the first archived file
    start_gno: int = 1
    tables: int = 4  # sbtest tables (oltp)
    rows_per_table: int = 1000  # initial key space
    group_commit: int = 4  # transactions per binlog group commit (logical clock)
    #: the oltp / ddl workloads also write a ``shop.orders`` table (JSON, DECIMAL, ENUM, SET, ...)
    orders: bool = True
    source_prefix: str = "src"
    base_name: str = "binlog"


# ---------------------------------------------------------------------------------------------
# Workload
# ---------------------------------------------------------------------------------------------

def _sbtest(i: int) -> Table:
    return Table("sbtest", f"sbtest{i}", (
        Column("id", "INT", nullable=False, primary_key=True),
        Column("k", "INT", nullable=False),
        Column("c", "CHAR(120)", nullable=False),
        Column("pad", "CHAR(60)", nullable=False),
    ), table_id=100 + i)


ORDERS = Table("shop", "orders", (
    Column("id", "BIGINT UNSIGNED", nullable=False, primary_key=True),
    Column("customer", "VARCHAR(64)"),
    Column("amount", "DECIMAL(12,2)"),
    Column("status", "ENUM('new','paid','shipped','cancelled')"),
    Column("created_at", "DATETIME(6)"),
    Column("updated_at", "TIMESTAMP(3)"),
    Column("attrs", "JSON"),
    Column("flags", "SET('gift','express','fragile')"),
    Column("qty", "SMALLINT UNSIGNED"),
    Column("weight", "DOUBLE"),
    Column("ship_date", "DATE"),
    Column("note", "TEXT"),
), table_id=200)

DOCS = Table("media", "docs", (
    Column("id", "BIGINT", nullable=False, primary_key=True),
    Column("title", "VARCHAR(255)"),
    Column("body", "JSON"),
    Column("payload", "LONGBLOB"),
), table_id=300)


def _create_sql(t: Table) -> str:
    cols = ", ".join(f"`{c.name}` {c.sql_type}{'' if c.nullable else ' NOT NULL'}" for c in t.columns)
    pk = ", ".join(f"`{c.name}`" for c in t.columns if c.primary_key)
    return f"CREATE TABLE `{t.name}` ({cols}{', PRIMARY KEY (' + pk + ')' if pk else ''})"


class _Workload:
    """Produces transactions as lists of ('rows', kind, table, rows) / ('ddl', sql, schema)."""

    def __init__(self, cfg: SyntheticConfig, rng: random.Random) -> None:
        self.cfg = cfg
        self.rng = rng
        self.kind = cfg.workload
        self.sbtest = [_sbtest(i + 1) for i in range(max(cfg.tables, 1))]
        self.tables: list[Table] = []
        if self.kind in ("oltp", "ddl"):
            self.tables += self.sbtest
        if self.kind in ("oltp", "ddl") and cfg.orders:
            self.tables.append(ORDERS)
        if self.kind == "blob":
            self.tables.append(DOCS)
        self.next_id = {t: 1 for t in self.tables}
        self.live: dict[Table, dict[int, Any]] = {t: {} for t in self.tables}
        # string pools (fast, deterministic)
        self.c_pool = ["-".join(f"{rng.randrange(10**11):011d}" for _ in range(10))[:119]
                       for _ in range(512)]
        self.pad_pool = ["-".join(f"{rng.randrange(10**11):011d}" for _ in range(5))[:59]
                         for _ in range(512)]
        self.names = ["ada", "grace", "linus", "ken", "barbara", "édith", "李雷", "guido", "margaret"]
        self.ddl_counter = 0

    def setup(self) -> list[list[tuple]]:
        """DDL creating the tables, then initial rows."""
        out: list[list[tuple]] = []
        for t in self.tables:
            out.append([("ddl", _create_sql(t), t.schema)])
        for t in self.tables:
            n = self.cfg.rows_per_table if t in self.sbtest else max(self.cfg.rows_per_table // 10, 10)
            if t is DOCS:
                n = 5
            batch: list[Any] = []
            for _ in range(n):
                batch.append(self._new_row(t))
                if len(batch) == 100:
                    out.append([("rows", "insert", t, batch)])
                    batch = []
            if batch:
                out.append([("rows", "insert", t, batch)])
        return out

    def _new_row(self, t: Table) -> Any:
        i = self.next_id[t]
        self.next_id[t] = i + 1
        rng = self.rng
        row: Any
        if t in self.sbtest:
            row = (i, rng.randrange(1, 1 << 20), rng.choice(self.c_pool), rng.choice(self.pad_pool))
        elif t is ORDERS:
            ts = self.cfg.start_time + i
            row = {
                "id": i, "customer": rng.choice(self.names) if rng.random() > 0.05 else None,
                "amount": Decimal(rng.randrange(-10**6, 10**8)).scaleb(-2),
                "status": rng.choice(("new", "paid", "shipped", "cancelled")),
                "created_at": _dt.datetime(2024, 1 + i % 12, 1 + i % 28, i % 24, i % 60, i % 60,
                                           (i * 7919) % 1_000_000),
                "updated_at": _dt.datetime.fromtimestamp(ts, _dt.UTC).replace(
                    microsecond=(i * 1000) % 1_000_000),
                "attrs": {"sku": f"SKU-{i}", "tags": ["a", "b"][: i % 3], "n": i % 1000,
                          "price": (i % 997) / 4, "ok": bool(i % 2), "none": None},
                "flags": ",".join(f for k, f in enumerate(("gift", "express", "fragile")) if i >> k & 1),
                "qty": i % 65536, "weight": (i % 1000) / 8.0,
                "ship_date": _dt.date(2024, 1 + i % 12, 1 + i % 28),
                "note": None if i % 3 else f"note {i} " * (i % 7),
            }
        else:
            size = rng.randrange(8 << 10, 160 << 10)
            row = {"id": i, "title": f"document {i}",
                   "body": {"id": i, "sections": [{"h": f"s{k}", "text": "lorem ipsum " * 20}
                                                  for k in range(rng.randrange(1, 40))]},
                   "payload": rng.randbytes(size)}
        self.live[t][i] = row
        return row

    def _pick(self, t: Table) -> tuple[int, Any] | None:
        live = self.live[t]
        if not live:
            return None
        # ids are mostly dense: probe a few random ids
        hi = self.next_id[t]
        for _ in range(8):
            i = self.rng.randrange(1, hi)
            row = live.get(i)
            if row is not None:
                return i, row
        i = next(iter(live))
        return i, live[i]

    def _update(self, t: Table, row: Any) -> Any:
        rng = self.rng
        new: Any
        if t in self.sbtest:
            if rng.random() < 0.5:
                new = (row[0], row[1] + 1, row[2], row[3])
            else:
                new = (row[0], row[1], rng.choice(self.c_pool), row[3])
        elif t is ORDERS:
            new = dict(row, status=rng.choice(("paid", "shipped", "cancelled")),
                       qty=(row["qty"] + 1) % 65536)
        else:
            new = dict(row, title=row["title"] + "*")
        self.live[t][new[0] if isinstance(new, tuple) else new["id"]] = new
        return new

    def transaction(self) -> list[tuple]:
        rng = self.rng
        if self.kind == "ddl" and rng.random() < 0.3:
            self.ddl_counter += 1
            n = self.ddl_counter
            sql = rng.choice((
                f"CREATE TABLE IF NOT EXISTS `tmp_{n}` (id INT PRIMARY KEY, v VARCHAR(32))",
                f"ALTER TABLE `tmp_{max(n - 1, 1)}` ADD COLUMN c{n} INT",
                f"DROP TABLE IF EXISTS `tmp_{max(n - 2, 1)}`",
                f"CREATE INDEX idx_{n} ON `sbtest1` (k)",
                f"ANALYZE TABLE `sbtest{1 + n % len(self.sbtest)}`",
            ))
            return [("ddl", sql, "sbtest")]
        if self.kind == "blob":
            t = DOCS
            ops: list[tuple] = []
            r = rng.random()
            if r < 0.6 or len(self.live[t]) < 3:
                ops.append(("rows", "insert", t, [self._new_row(t)]))
            elif r < 0.9:
                picked = self._pick(t)
                if picked:
                    ops.append(("rows", "update", t, [(picked[1], self._update(t, picked[1]))]))
            else:
                picked = self._pick(t)
                if picked:
                    del self.live[t][picked[0]]
                    ops.append(("rows", "delete", t, [picked[1]]))
            return ops
        # sysbench oltp_read_write writes: index update, non-index update, delete + insert
        ops = []
        t = rng.choice(self.sbtest)
        for _ in range(2):
            picked = self._pick(t)
            if picked:
                ops.append(("rows", "update", t, [(picked[1], self._update(t, picked[1]))]))
        picked = self._pick(t)
        if picked:
            del self.live[t][picked[0]]
            ops.append(("rows", "delete", t, [picked[1]]))
        ops.append(("rows", "insert", t, [self._new_row(t)]))
        if self.cfg.orders and rng.random() < 0.25:
            o = ORDERS
            if rng.random() < 0.5 or not self.live[o]:
                ops.append(("rows", "insert", o, [self._new_row(o) for _ in range(rng.randrange(1, 4))]))
            else:
                picked = self._pick(o)
                if picked:
                    ops.append(("rows", "update", o, [(picked[1], self._update(o, picked[1]))]))
        return ops


# ---------------------------------------------------------------------------------------------
# Output sinks
# ---------------------------------------------------------------------------------------------

class _Sink:
    """Where files go: a local folder (streamed to disk) or an object store (put per file)."""

    def __init__(self, dest: str, s3_settings: Any = None) -> None:
        self.dest = dest
        self.s3 = is_s3_uri(dest)
        if self.s3:
            self.store = open_object_store(dest, s3_settings)
        else:
            self.root = Path(dest)
            self.root.mkdir(parents=True, exist_ok=True)

    def open(self, name: str) -> Any:
        if self.s3:
            return io.BytesIO()
        path = self.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        return open(path, "w+b")

    def finish(self, name: str, stream: Any) -> None:
        if self.s3:
            self.store.put(name, stream.getvalue())
        else:
            stream.close()

    def read(self, name: str) -> bytes:
        if self.s3:
            return self.store.read_all(name)
        return (self.root / name).read_bytes()

    def write(self, name: str, data: bytes) -> None:
        if self.s3:
            self.store.put(name, data)
        else:
            p = self.root / name
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(data)

    def patch(self, name: str, offset: int, data: bytes) -> None:
        if self.s3:
            b = bytearray(self.read(name))
            b[offset:offset + len(data)] = data
            self.store.put(name, bytes(b))
        else:
            with open(self.root / name, "r+b") as f:
                f.seek(offset)
                f.write(data)

    def truncate(self, name: str, size: int) -> None:
        if self.s3:
            self.store.put(name, self.read(name)[:size])
        else:
            os.truncate(self.root / name, size)

    def delete(self, name: str) -> None:
        if self.s3:
            self.store.delete(name)
        else:
            (self.root / name).unlink()


# ---------------------------------------------------------------------------------------------
# Generation
# ---------------------------------------------------------------------------------------------

@dataclass
class _FileInfo:
    name: str
    previous_gtids: str
    gtids: list[Gtid] = field(default_factory=list)
    closing_event: str | None = None
    next_file: str | None = None
    in_use: bool = False
    size: int = 0
    transactions: int = 0
    rows_by_table: dict[str, dict[str, int]] = field(default_factory=dict)
    server_restart_before: bool = False
    skipped_gtids: list[Gtid] = field(default_factory=list)
    # tail bookkeeping: last transactions (start, end, gtid, rows)
    tail: deque = field(default_factory=lambda: deque(maxlen=4))


def _add_rows(acc: dict[str, dict[str, int]], key: str, kind: str, n: int) -> None:
    d = acc.setdefault(key, {"insert": 0, "update": 0, "delete": 0})
    d[kind] += n


def _server_uuid(rng: random.Random) -> str:
    return str(_uuid.UUID(int=rng.getrandbits(128), version=4))


class _SourceWriter:
    """One synthetic source being written: a server's binlog files, transaction by transaction.

    Why a class: the writer, the GTID counters, the logical clock and the fault plan are one
    state that every step (choose a GTID, write a transaction, rotate) reads and moves on. The
    order of the random draws is part of the output (same seed, same bytes), so each step draws
    exactly where the single loop it replaces did.
    """

    # fault placement (file indexes)
    GAP_FILE, MISSING_FILE, RESTART_AFTER, BREAK_AFTER = 1, 2, 3, 5

    def __init__(self, cfg: SyntheticConfig, sink: _Sink, index: int, faults: Faults,
                 progress: Callable[[str], None] | None) -> None:
        self.cfg, self.sink, self.index, self.faults, self.progress = cfg, sink, index, faults, progress
        self.rng = random.Random(f"{cfg.seed}:{index}")
        self.source = f"{cfg.source_prefix}{index + 1}"
        self.server_id = 100 + index
        self.tags = tuple(cfg.tags)
        self.uuids: list[str] = []
        self.next_gno: dict[tuple[str, str], int] = {}
        self.executed: list[Gtid] = []
        self.purged = GtidSet()
        self._new_server(max(cfg.uuids, 1), cfg.start_gno)
        version = cfg.server_version
        if self.tags and server_version_split(version) < (8, 3, 0):
            version = "8.4.3"
        self.version = version
        self.work = _Workload(cfg, self.rng)
        self.files: list[_FileInfo] = []
        self.file_no = 0
        self.now = cfg.start_time
        self.xid = 1000
        self.written_bytes = 0
        self.chain_breaks: list[int] = []  # indexes of files starting a new GTID history
        self.all_executed: list[Gtid] = []
        self.gap_done = False
        self.seq = 0
        self.last_committed = 0
        self.txn_index = 0

    @property
    def own_uuid(self) -> str:
        return self.uuids[0]

    def _new_server(self, uuid_count: int, start_gno: int) -> None:
        """New server UUIDs and an empty GTID history starting at ``start_gno``."""
        own_uuid = _server_uuid(self.rng)
        self.uuids = [own_uuid] + [_server_uuid(self.rng) for _ in range(uuid_count - 1)]
        self.next_gno = {(u, ""): start_gno for u in self.uuids}
        for tg in self.tags:
            self.next_gno[(own_uuid, tg)] = 1
        self.executed = []
        self.purged = (GtidSet.from_intervals([(u, "", 1, start_gno - 1) for u in self.uuids])
                       if start_gno > 1 else GtidSet())

    def executed_set(self) -> GtidSet:
        return self.purged | GtidSet.from_gtids(self.executed)

    def _open_file(self, restart: bool) -> None:
        self.file_no += 1
        name = f"{self.cfg.base_name}.{self.file_no:06d}"
        self.stream = self.sink.open(f"{self.source}/{name}")
        prev = self.executed_set()
        self.w = BinlogFileWriter(
            self.stream, server_version=self.version, server_id=self.server_id, timestamp=self.now,
            create_timestamp=self.now if (restart or self.file_no == 1) else 0, previous_gtids=prev,
            compression="zstd" if self.cfg.compression else None, thread_id=7 + self.index)
        self.info = _FileInfo(name, str(prev), server_restart_before=restart)
        self.seq = 0
        self.last_committed = 0

    def run(self) -> dict[str, Any]:
        """Write every file of the source, then the ground truth of its archive."""
        setup_iter = iter(self.work.setup())
        self._open_file(restart=True)
        last_progress = time.monotonic()
        while True:
            ops = next(setup_iter, None)
            if ops is None:
                ops = self.work.transaction()
            if not ops:
                continue
            self.txn_index += 1
            self._write_transaction(ops, self._next_gtid())
            if self.txn_index % 50 == 0:
                self.now += 1
            if self.written_bytes + self.w.pos >= self.cfg.bytes_per_server:
                break  # the last file: closed below (ROTATE, or left in use / cut by a fault)
            if self.w.pos >= self.cfg.max_binlog_size:
                self._rotate()
                if self.progress and time.monotonic() - last_progress > 5:
                    last_progress = time.monotonic()
                    self.progress(f"{self.source}: {self.written_bytes / 2**20:.0f} MiB, {len(self.files)} files")
        self._close_last_file()
        return _finish_source(self)

    def _next_gtid(self) -> Gtid:
        """The next transaction's GTID (own, tagged or replicated), skipping one for the gap fault."""
        rng, info = self.rng, self.info
        if self.tags and rng.random() < 0.2:
            key = (self.own_uuid, rng.choice(self.tags))
        elif len(self.uuids) > 1 and rng.random() < 0.3:
            key = (rng.choice(self.uuids[1:]), "")
        else:
            key = (self.own_uuid, "")
        if (self.faults.gno_gap and not self.gap_done and len(self.files) == self.GAP_FILE
                and info.transactions >= 3):
            skipped = Gtid(key[0], self.next_gno[key], key[1])
            self.next_gno[key] += 1
            self.executed.append(skipped)  # executed on the server, never logged in the archive
            self.all_executed.append(skipped)
            info.skipped_gtids.append(skipped)
            self.gap_done = True
        gtid = Gtid(key[0], self.next_gno[key], key[1])
        self.next_gno[key] += 1
        return gtid

    def _write_transaction(self, ops: list[Any], gtid: Gtid) -> None:
        """One transaction (DDL, or BEGIN + rows events + XID) and its bookkeeping."""
        w, info = self.w, self.info
        # logical clock: group commits of cfg.group_commit transactions
        self.seq += 1
        if self.seq > 1 and (self.seq - 1) % max(self.cfg.group_commit, 1) == 0:
            self.last_committed = self.seq - 1
        now_us = self.now * 1_000_000 + (self.txn_index * 137) % 1_000_000
        start = w.pos
        if ops[0][0] == "ddl":
            _, sql, schema = ops[0]
            w.ddl(sql, schema, gtid, last_committed=self.last_committed, sequence_number=self.seq,
                  timestamp=self.now, commit_timestamp=now_us)
        else:
            w.begin_transaction(gtid, last_committed=self.last_committed, sequence_number=self.seq,
                                timestamp=self.now, commit_timestamp=now_us)
            for _op, kind, table, rows in ops:
                if kind == "insert":
                    w.write_rows(table, rows)
                elif kind == "update":
                    w.update_rows(table, rows)
                else:
                    w.delete_rows(table, rows)
            self.xid += 1
            w.xid(self.xid)
        self.executed.append(gtid)
        self.all_executed.append(gtid)
        info.gtids.append(gtid)
        info.transactions += 1
        txn_rows: dict[str, dict[str, int]] = {}
        for op in ops:
            if op[0] == "rows":
                _add_rows(txn_rows, f"{op[2].schema}.{op[2].name}", op[1], len(op[3]))
        for k, d in txn_rows.items():
            for kind, n in d.items():
                if n:
                    _add_rows(info.rows_by_table, k, kind, n)
        info.tail.append((start, w.pos, gtid, txn_rows))

    def _rotate(self) -> None:
        """Close the current file (ROTATE, or STOP before a restart / new server) and open the next."""
        restart_now = self.faults.restart and len(self.files) == self.RESTART_AFTER
        if self.faults.chain_break and len(self.files) == self.BREAK_AFTER:
            # a new server takes over the prefix: new UUIDs, empty history (RESET / restore)
            restart_now = True
            self._new_server(len(self.uuids), 1)
            self.chain_breaks.append(len(self.files) + 1)
        if restart_now:
            self.w.stop(timestamp=self.now)
            self.info.closing_event = "STOP"
        else:
            self._close_with_rotate()
        self._finish_file()
        self.now += 2 if restart_now else 0
        self._open_file(restart=restart_now)

    def _close_with_rotate(self) -> None:
        self.info.next_file = f"{self.cfg.base_name}.{self.file_no + 1:06d}"
        self.w.rotate(self.info.next_file, timestamp=self.now)
        self.info.closing_event = "ROTATE"

    def _finish_file(self) -> None:
        self.info.size = self.w.pos
        self.sink.finish(f"{self.source}/{self.info.name}", self.stream)
        self.written_bytes += self.w.pos
        self.files.append(self.info)

    def _close_last_file(self) -> None:
        """The last file: left in use (for the tail faults) or closed by a ROTATE."""
        if self.faults.in_use_last or self.faults.truncated_tail or self.faults.corrupted_tail:
            self.w.close(in_use=True)
            self.info.in_use = True
        else:
            self._close_with_rotate()
        self._finish_file()


def _generate_source(cfg: SyntheticConfig, sink: _Sink, index: int, faults: Faults,
                     progress: Callable[[str], None] | None) -> dict[str, Any]:
    return _SourceWriter(cfg, sink, index, faults, progress).run()


def _file_record(source: str, f: _FileInfo) -> dict[str, Any]:
    """The ground truth of one written file (before any fault touches it)."""
    return {
        "name": f.name, "object": f"{source}/{f.name}", "size": f.size,
        "previous_gtids": f.previous_gtids,
        "gtids": str(GtidSet.from_gtids(f.gtids)),
        "readable_gtids": str(GtidSet.from_gtids(f.gtids)),
        "first_gtid": str(f.gtids[0]) if f.gtids else None,
        "last_gtid": str(f.gtids[-1]) if f.gtids else None,
        "skipped_gtids": str(GtidSet.from_gtids(f.skipped_gtids)),
        "closing_event": f.closing_event, "next_file": f.next_file, "in_use": f.in_use,
        "truncated": False, "corrupted": False, "present": True, "duplicate_of": None,
        "server_restart_before": f.server_restart_before,
        "transactions": f.transactions, "readable_transactions": f.transactions,
        "rows_by_table": f.rows_by_table,
        "readable_rows_by_table": json.loads(json.dumps(f.rows_by_table)),
    }


def _apply_tail_fault(sink: _Sink, faults: Faults, last: dict[str, Any], last_info: _FileInfo) -> list[str]:
    """Cut or corrupt the last file's final transaction; the fault names applied."""
    if faults.truncated_tail and last_info.tail:
        start, end, gtid, txn_rows = last_info.tail[-1]
        cut = end - 10  # inside the final XID (or QUERY) event
        sink.truncate(last["object"], cut)
        last["size"] = cut
        last["truncated"] = True
        _drop_last_txn(last, last_info, txn_rows)
        return ["truncated_tail"]
    if faults.corrupted_tail and last_info.tail:
        start, end, gtid, txn_rows = last_info.tail[-1]
        at = start + 19 + 3  # inside the GTID event's UUID: CRC32 mismatch
        b = sink.read(last["object"])[at:at + 1]
        sink.patch(last["object"], at, bytes((b[0] ^ 0xFF,)))
        last["corrupted"] = True
        last["corrupt_offset"] = at
        _drop_last_txn(last, last_info, txn_rows)
        return ["corrupted_tail"]
    return []


def _expected_reconciliation(records: list[dict[str, Any]], chain_breaks: list[int],
                             missing_index: int | None) -> list[dict[str, Any]]:
    """What reconciliation must report for each present file (duplicates added by the caller)."""
    recon: list[dict[str, Any]] = []
    for i, rec in enumerate(records):
        if not rec["present"]:
            continue
        status, missing, detail = "OK", "", ""
        missing_files: list[str] = []
        if rec["skipped_gtids"]:
            status, missing = "GAP", rec["skipped_gtids"]
            detail = "GNO gap inside the file"
        if i in chain_breaks:
            status, detail = "CHAIN_BREAK", "a new GTID history starts (server replaced / RESET)"
        if missing_index is not None and i == missing_index + 1:
            status = "GAP"
            gone = records[missing_index]["gtids"]
            missing = str(GtidSet.from_text(missing) | GtidSet.from_text(gone)) if missing else gone
            missing_files = [records[missing_index]["name"]]
            detail = "predecessor file not in the archive"
        recon.append({"file": rec["name"], "status": status, "missing_gtids": missing,
                      "missing_files": missing_files, "duplicate_of": None,
                      "truncated": rec["truncated"], "detail": detail})
    return recon


def _archive_totals(records: list[dict[str, Any]]) -> tuple[GtidSet, int, dict[str, dict[str, int]]]:
    """GTIDs, transactions and row counts a reader finds (present, readable, duplicates once)."""
    readable = GtidSet()
    rows: dict[str, dict[str, int]] = {}
    txns = 0
    for rec in records:
        if not rec["present"] or rec["duplicate_of"]:
            continue
        readable = readable | GtidSet.from_text(rec["readable_gtids"])
        txns += rec["readable_transactions"]
        for k, d in rec["readable_rows_by_table"].items():
            for kind, n in d.items():
                _add_rows(rows, k, kind, n)
    for d in rows.values():
        d["total"] = d["insert"] + d["update"] + d["delete"]
    return readable, txns, rows


def _finish_source(gen: _SourceWriter) -> dict[str, Any]:
    """Apply the file-level faults to the written files and return the source's ground truth."""
    sink, faults, source, files, chain_breaks = gen.sink, gen.faults, gen.source, gen.files, gen.chain_breaks
    records = [_file_record(source, f) for f in files]
    applied = _apply_tail_fault(sink, faults, records[-1], files[-1])
    if records[-1]["in_use"]:
        applied.append("in_use_last")
    if any(f.skipped_gtids for f in files):
        applied.append("gno_gap")
    if any(f.server_restart_before for i, f in enumerate(files[1:], 1) if i not in chain_breaks):
        applied.append("restart")
    if chain_breaks:
        applied.append("chain_break")
    missing_index = None
    if faults.missing_file and len(files) >= 4:
        missing_index = min(gen.MISSING_FILE, len(files) - 2)
        rec = records[missing_index]
        sink.delete(rec["object"])
        rec["present"] = False
        applied.append("missing_file")
    dup_record = None
    if faults.duplicate_file and len(files) >= 2:
        orig = records[0]
        dup_name = orig["name"] + ".copy"
        sink.write(f"{source}/{dup_name}", sink.read(orig["object"]))
        dup_record = dict(json.loads(json.dumps(orig)), name=dup_name,
                          object=f"{source}/{dup_name}", duplicate_of=orig["name"])
        applied.append("duplicate_file")
    recon = _expected_reconciliation(records, chain_breaks, missing_index)
    if dup_record is not None:
        recon.append({"file": dup_record["name"], "status": "DUPLICATE", "missing_gtids": "",
                      "missing_files": [], "duplicate_of": dup_record["duplicate_of"],
                      "truncated": False, "detail": "same content uploaded twice"})
        records.append(dup_record)
    readable, txns, rows = _archive_totals(records)
    return {
        "source": source, "prefix": f"{source}/", "server_id": gen.server_id, "server_uuid": gen.own_uuid,
        "uuids": gen.uuids, "server_version": gen.version, "faults": applied, "files": records,
        "reconciliation": recon, "gtid_executed": str(gen.executed_set()),
        "gtid_executed_all_histories": str(GtidSet.from_gtids(gen.all_executed)),
        "chain_breaks": [records[i]["name"] for i in chain_breaks],
        "archived_gtids": str(readable), "transactions": txns, "rows_by_table": rows,
    }


def _drop_last_txn(rec: dict[str, Any], info: _FileInfo, txn_rows: dict[str, dict[str, int]]) -> None:
    gtids = info.gtids[:-1]
    rec["readable_gtids"] = str(GtidSet.from_gtids(gtids))
    rec["readable_transactions"] = rec["transactions"] - 1
    for k, d in txn_rows.items():
        for kind, n in d.items():
            rec["readable_rows_by_table"][k][kind] -= n


def generate(dest: str, cfg: SyntheticConfig | None = None, *,
             truth_name: str = "ground_truth.json",
             progress: Callable[[str], None] | None = None,
             s3_settings: Any = None) -> dict[str, Any]:
    """Write the archive under ``dest`` (folder or s3:// prefix) and return the ground truth
    (also written to ``dest/<truth_name>``, outside every source prefix). ``s3_settings``:
    a ``binlake.config.S3Settings`` (endpoint...) for s3:// destinations; default: the
    standard AWS chain and ``AWS_ENDPOINT_URL_S3``."""
    cfg = cfg or SyntheticConfig()
    t0 = time.monotonic()
    sink = _Sink(dest, s3_settings)
    sources = []
    for i in range(cfg.servers):
        faults = cfg.faults if i == 0 else Faults()
        sources.append(_generate_source(cfg, sink, i, faults, progress))
    cfg_d = asdict(cfg)
    cfg_d["tags"] = list(cfg.tags)
    total = sum(f["size"] for s in sources for f in s["files"] if f["present"])
    truth = {
        "format": "binlake-synthetic/1",
        "dest": dest,
        "config": cfg_d,
        "sources": {s["source"]: s for s in sources},
        "total_bytes": total,
        "generation_seconds": round(time.monotonic() - t0, 3),
    }
    sink.write(truth_name, json.dumps(truth, indent=1, sort_keys=False).encode())
    return truth


# ---------------------------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------------------------

def _size(text: str) -> int:
    t = text.strip().upper().replace("IB", "").replace("B", "")
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(t[-1:], 1)
    return int(float(t[:-1] if t[-1:] in "KMG" else t) * mult)


def build_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    p = parser or argparse.ArgumentParser(
        prog="python -m binlake_testing.synthetic",
        description="Generate a synthetic MySQL binlog archive with ground truth.")
    p.add_argument("dest", help="local folder or s3://bucket/prefix")
    p.add_argument("--servers", type=int, default=1)
    p.add_argument("--size", default="1MiB", help="binlog bytes per server (e.g. 64MiB, 1GiB)")
    p.add_argument("--max-binlog-size", default="256KiB", help="rotate files at this size")
    p.add_argument("--workload", choices=("oltp", "ddl", "blob"), default="oltp")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--server-version", default="8.0.40")
    p.add_argument("--compression", action="store_true", help="zstd TRANSACTION_PAYLOAD events")
    p.add_argument("--uuids", type=int, default=1, help="GTID UUIDs per source")
    p.add_argument("--tags", default="", help="comma-separated GTID tags (implies 8.4 format)")
    p.add_argument("--faults", default="", help=f"comma list or 'all': {', '.join(FAULT_NAMES)}")
    p.add_argument("--start-gno", type=int, default=1)
    p.add_argument("--tables", type=int, default=4)
    p.add_argument("--no-orders", action="store_true", help="sbtest tables only (oltp/ddl)")
    p.add_argument("--quiet", action="store_true")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_args(args)


def run_args(args: argparse.Namespace) -> int:
    cfg = SyntheticConfig(
        servers=args.servers, bytes_per_server=_size(args.size),
        max_binlog_size=_size(args.max_binlog_size), workload=args.workload, seed=args.seed,
        server_version=args.server_version, compression=args.compression, uuids=args.uuids,
        tags=tuple(t for t in args.tags.split(",") if t), faults=Faults.parse(args.faults),
        start_gno=args.start_gno, tables=args.tables, orders=not args.no_orders)
    say = None if args.quiet else (lambda m: print(m, file=sys.stderr, flush=True))
    s3 = None
    if is_s3_uri(args.dest):
        s3 = load_config().s3
    truth = generate(args.dest, cfg, progress=say, s3_settings=s3)
    for name, s in truth["sources"].items():
        present = sum(1 for f in s["files"] if f["present"])
        print(f"{name}: {present} files, {s['transactions']} transactions, "
              f"gtids {s['archived_gtids'][:80]}{'...' if len(s['archived_gtids']) > 80 else ''}, "
              f"faults: {', '.join(s['faults']) or 'none'}")
    print(f"total {truth['total_bytes'] / 2**20:.1f} MiB in {truth['generation_seconds']} s; "
          f"ground truth: {args.dest.rstrip('/')}/ground_truth.json")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
