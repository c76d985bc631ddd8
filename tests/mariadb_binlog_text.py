"""Run MariaDB's C decoder (``mariadb-binlog``) and parse its text output into records.

Used by ``tests/test_differential_mariadb_binlog.py`` to compare our decoder, event by event and
value by value, with an independent implementation.

``mariadb-binlog --base64-output=decode-rows -vv --print-table-metadata FILE`` (rerun with
``--force-read`` when it stops on an event type it does not know, and without
``--print-table-metadata`` when that crashes it) prints, per event::

    # at 1138                                          <- event position
    #261122  5:28:04 server id 7  end_log_pos 1895 CRC32 0x6aba0f9b 	Annotate_rows:
    <event text: SQL statements ending in /*!*/;, '#Q> ' lines, '# ...' comments>

Rows events are buffered until their statement ends: the ``# at`` lines of an Annotate_rows /
Table_map / rows-event group come first, then their headers, then the decoded rows of the whole
group (``### INSERT INTO `db`.`t``` / ``### SET`` / ``###   @N=value /* TYPE meta=M
nullable=N is_null=N */``) and ``# Number of rows: N``. The parser therefore keeps a queue of
pending positions and lets the caller pick which pending position a header belongs to (a
``resolve`` callback; the default is first-in-first-out). Row images are attached to the
*group* of rows events whose headers were printed since the previous group.

Value text (MariaDB ``sql/log_event_client.cc``, ``log_event_print_value``):
integers signed, then `` (unsigned)`` when negative; DECIMAL with all its scale digits; FLOAT
``%-20g``; DOUBLE ``%-.20g``; BIT / SET ``b'0101'`` (SET bytes in storage order); ENUM the index;
TIMESTAMP the epoch seconds (``.frac`` with fsp); DATE ``'YYYY:MM:DD'``; DATETIME / TIME
quoted; YEAR ``raw + 1900``; strings and blobs quoted with bytes < 0x20 as ``\\xNN`` and every
other byte raw (quotes and backslashes are *not* escaped, despite the code's intent); NULL.

Everything is kept as ``bytes``: the output mixes charsets exactly as stored.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field

MARIADB_BINLOG = shutil.which("mariadb-binlog") or shutil.which("mysqlbinlog")

_HEADER = re.compile(
    rb"^#(\d{6} [ \d]\d:\d\d:\d\d) server id (\d+)  end_log_pos (\d+) "
    rb"(?:CRC32 0x([0-9a-f]{8}) )?(.*)$")
_AT = re.compile(rb"^# at (\d+)$")
_VALUE = re.compile(
    rb"^###   @(\d+)=(.*) /\* (.*?) ?meta=(\d+) nullable=(\d) is_null=(\d) \*/$")
_ROWS_START = re.compile(rb"^### (INSERT INTO|UPDATE|DELETE FROM) `(.*)`\.`(.*)`$")
_NROWS = re.compile(rb"^# Number of rows: (\d+)$")


@dataclass
class Value:
    index: int            # 1-based column number (@N)
    text: bytes           # the printed value, verbatim
    typestr: str          # "INT", "DECIMAL(12,2)", "VARSTRING(256)" ... ("" when unknown)
    meta: int
    nullable: bool
    is_null: bool


@dataclass
class RowImage:
    op: str               # insert / update / delete
    schema: bytes
    table: bytes
    before: list[Value] | None = None   # WHERE image
    after: list[Value] | None = None    # SET image


@dataclass
class MBEvent:
    pos: int
    end_log_pos: int
    server_id: int
    time_text: str
    crc: int | None
    label: bytes                      # text after the header fields ("Query\tthread_id=...")
    kind: str                         # normalised label: Start, Query, Xid, Table_map, ...
    lines: list[bytes] = field(default_factory=list)  # the event's text after the header
    group: RowGroup | None = None   # rows events: the group their rows were printed in
    reprint: bool = False             # a header printed again (old LOAD events), not an event

    # -- parsed facts ----------------------------------------------------------------
    def _line_match(self, pattern: bytes) -> re.Match[bytes] | None:
        """The match of ``pattern`` at the start of the first of the event's lines it fits."""
        for ln in self.lines:
            m = re.match(pattern, ln)
            if m:
                return m
        return None

    @property
    def body(self) -> bytes:
        return b"\n".join(self.lines)

    def query(self) -> bytes | None:
        """The statement text of a Query / Execute_load_query event (without the SETs)."""
        chunks = self.body.split(b"/*!*/;")
        if len(chunks) < 2:
            return None
        q = chunks[-2]
        # the statement follows the previous "...;" line end and is followed by "\n/*!*/;"
        if q.startswith(b"\n"):
            q = q[1:]
        if q.endswith(b"\n"):
            q = q[:-1]
        return q

    def xid(self) -> int | None:
        m = re.match(rb"Xid = (\d+)$", self.label)
        return int(m.group(1)) if m else None

    def rotate(self) -> tuple[bytes, int] | None:
        m = re.match(rb"Rotate to (.*)  pos: (\d+)$", self.label)
        return (m.group(1), int(m.group(2))) if m else None

    def mariadb_gtid(self) -> tuple[str, str] | None:
        """('0-7-3', 'trans' / 'ddl' / ...) of a MariaDB GTID event."""
        m = re.match(rb"GTID (\d+-\d+-\d+)(?: (.*))?$", self.label)
        return (m.group(1).decode(), (m.group(2) or b"").decode()) if m else None

    def gtid_list(self) -> str | None:
        """The GTIDs of a Gtid list, comma-separated (printed one per line: "[0-7-153,",
        "# 3-7-41]")."""
        text = self.label
        for ln in self.lines:
            if text.endswith(b"]"):
                break
            text += ln[2:] if ln.startswith(b"# ") else ln
        m = re.match(rb"Gtid list \[(.*)\]$", text)
        return m.group(1).decode() if m else None

    def xa_xid(self) -> tuple[str, str, int] | None:
        """(gtrid hex, bqual hex, formatID) of an XA_PREPARE event ("XID = X'..',X'..',1")."""
        m = re.match(rb"XID = X'([0-9A-F]*)',X'([0-9A-F]*)',(\d+)$", self.label)
        return (m.group(1).decode().lower(), m.group(2).decode().lower(), int(m.group(3))) if m else None

    def checkpoint(self) -> bytes | None:
        m = re.match(rb"Binlog checkpoint (.*)$", self.label)
        return m.group(1) if m else None

    def start(self) -> tuple[int, bytes] | None:
        m = re.match(rb"Start: binlog v (\d+), server v (.*?) created ", self.label)
        return (int(m.group(1)), m.group(2)) if m else None

    def table_map(self) -> tuple[bytes, bytes, int] | None:
        m = re.match(rb"Table_map: `(.*)`\.`(.*)` mapped to number (\d+)$", self.label)
        return (m.group(1), m.group(2), int(m.group(3))) if m else None

    def rows_header(self) -> tuple[int, bool] | None:
        """(table_id, STMT_END_F) of a rows event."""
        m = re.match(rb"\w+_rows(?:_old|_compressed(?:_v1)?)?: table id (\d+)( flags: STMT_END_F)?$",
                     self.label)
        return (int(m.group(1)), bool(m.group(2))) if m else None

    def table_metadata(self) -> tuple[bytes | None, bytes | None]:
        """(columns text, primary key text) printed by --print-table-metadata.

        Columns: what is between ``# Columns(`` and the final ``)``, continuation lines joined
        (``,\n#         `` kept as is); primary key: what is inside ``# Primary Key(...)``.
        """
        cols = pk = None
        for i, ln in enumerate(self.lines):
            if ln.startswith(b"# Columns("):
                j = i
                while not self.lines[j].endswith(b")"):
                    j += 1
                cols = b"\n".join(self.lines[i:j + 1])[len(b"# Columns("):-1]
            elif ln.startswith(b"# Primary Key(") and ln.endswith(b")"):
                pk = ln[len(b"# Primary Key("):-1]
        return cols, pk

    def ignorable_type(self) -> int | None:
        m = self._line_match(rb"# Ignorable event type (\d+) ")
        return int(m.group(1)) if m else None

    def annotate(self) -> bytes | None:
        qs = [ln[4:] for ln in self.lines if ln.startswith(b"#Q> ")]
        return b"\n".join(qs) if qs else None

    def intvar(self) -> tuple[bytes, int] | None:
        m = self._line_match(rb"SET (LAST_INSERT_ID|INSERT_ID)=(\d+)/\*!\*/;$")
        return (m.group(1), int(m.group(2))) if m else None

    def rand(self) -> tuple[int, int] | None:
        m = self._line_match(rb"SET @@RAND_SEED1=(\d+), @@RAND_SEED2=(\d+)/\*!\*/;$")
        return (int(m.group(1)), int(m.group(2))) if m else None

    def user_var(self) -> bytes | None:
        """The ``SET @`name`:=value`` statement (without the delimiter)."""
        for ln in self.lines:
            if ln.startswith(b"SET @`"):
                return ln[:-len(b"/*!*/;")] if ln.endswith(b"/*!*/;") else ln
        return None

    def load_block(self) -> tuple[int, int] | None:
        """(file_id, block_len) of Begin_load_query / Append_block."""
        m = self._line_match(rb"#(?:Begin_load_query|Append_block): file_id: (\d+)  block_len: (\d+)$")
        return (int(m.group(1)), int(m.group(2))) if m else None


@dataclass
class RowGroup:
    events: list[MBEvent] = field(default_factory=list)
    rows: list[RowImage] = field(default_factory=list)
    count: int | None = None          # "# Number of rows: N"


@dataclass
class MBOutput:
    path: str
    returncode: int
    stderr: str
    events: list[MBEvent]
    groups: list[RowGroup]
    unconsumed_positions: list[int]   # "# at N" with no header (events printed as nothing)
    end_of_log: bool                  # "# End of log file" was printed
    notes: dict[int, list[bytes]]     # lines printed after a "# at N" that got no header
    force_read: bool                  # the output is from a --force-read run
    positions: list[int]              # every "# at N", in order
    table_metadata: bool = True       # run with --print-table-metadata

    def by_pos(self) -> dict[int, MBEvent]:
        return {e.pos: e for e in self.events if not e.reprint}


def _kind(label: bytes) -> str:
    if not label:
        return ""  # Begin_load_query / Append_block / Exec_load / Unknown: see the lines
    head = re.split(rb"[\t:= ]", label, maxsplit=1)[0]
    return {b"Rotate": "Rotate", b"GTID": "GTID", b"Gtid": "Gtid_list", b"Binlog": "Binlog_checkpoint",
            b"Xid": "Xid"}.get(head, head.decode("latin-1"))


def _line_kind(lines: list[bytes]) -> str:
    for ln in lines:
        for k in (b"Begin_load_query", b"Append_block", b"Exec_load", b"Delete_file"):
            if ln.startswith(b"#" + k + b":"):
                return k.decode()
        if ln == b"# Unknown event":
            return "Unknown"
    return ""


class _TextParser:
    """The state of one ``mariadb-binlog -vv`` parse: the event being read, the pending ``# at``
    positions, the row group and image being filled (see :func:`parse`)."""

    def __init__(self, resolve=None) -> None:
        self.resolve = resolve
        self.events: list[MBEvent] = []
        self.groups: list[RowGroup] = []
        self.pending: list[int] = []
        self.unconsumed: list[int] = []
        self.cur: MBEvent | None = None
        self.group = RowGroup()
        self.image: RowImage | None = None
        self.target: list[Value] | None = None
        self.end_of_log = False
        self.notes: dict[int, list[bytes]] = {}
        self.positions: list[int] = []

    def close_event(self) -> None:
        if self.cur is not None and not self.cur.kind:
            self.cur.kind = _line_kind(self.cur.lines)
        self.cur = None

    def row_line(self, line: bytes) -> None:
        """A ``###`` line: a value, the start of a row image, or its SET / WHERE part."""
        if line.startswith(b"###   @"):
            m = _VALUE.match(line)
            if m is None:
                raise ValueError(f"unparsed row line: {line[:200]!r}")
            self.target.append(Value(int(m.group(1)), m.group(2), m.group(3).decode("latin-1").strip(),
                                     int(m.group(4)), m.group(5) == b"1", m.group(6) == b"1"))
            return
        m = _ROWS_START.match(line)
        if m:
            op = {b"INSERT INTO": "insert", b"UPDATE": "update", b"DELETE FROM": "delete"}[m.group(1)]
            self.image = RowImage(op, m.group(2), m.group(3))
            self.group.rows.append(self.image)
            self.target = None
        elif line == b"### SET":
            self.image.after = self.target = []
        elif line == b"### WHERE":
            self.image.before = self.target = []
        else:
            raise ValueError(f"unparsed row line: {line[:200]!r}")

    def header(self, m: re.Match[bytes]) -> None:
        """An event header line: which pending ``# at`` it belongs to, and a new event."""
        self.close_event()
        end = int(m.group(3))
        label = m.group(5).lstrip(b"\t")
        if self.pending:
            i = self.resolve(self.pending, end, label) if self.resolve else 0
            self.unconsumed.extend(self.pending[:i])
            pos = self.pending[i]
            del self.pending[:i + 1]
            reprint = False
        else:  # a header printed again (old LOAD / CREATE_FILE when EXEC_LOAD comes)
            pos, reprint = -1, True
        self.cur = MBEvent(pos, end, int(m.group(2)), m.group(1).decode(),
                           int(m.group(4), 16) if m.group(4) else None, label, _kind(label),
                           reprint=reprint)
        self.events.append(self.cur)
        if not reprint and self.cur.rows_header() is not None:
            self.group.events.append(self.cur)
            self.cur.group = self.group

    def line(self, line: bytes) -> None:
        if line.startswith(b"###"):  # most lines of a big file: row images
            self.row_line(line)
            return
        m = _AT.match(line)
        if m:
            self.close_event()
            self.pending.append(int(m.group(1)))
            self.positions.append(self.pending[-1])
            return
        m = _HEADER.match(line)
        if m:
            self.header(m)
            return
        m = _NROWS.match(line)
        if m:
            self.group.count = int(m.group(1))
            self.groups.append(self.group)
            self.group = RowGroup()
            self.image = self.target = None
            return
        if line == b"# End of log file":
            self.end_of_log = True
        if self.cur is not None:
            self.cur.lines.append(line)
        elif self.pending and line:
            self.notes.setdefault(self.pending[-1], []).append(line)

    def finish(self):
        self.close_event()
        if self.group.events or self.group.rows:
            self.groups.append(self.group)
        self.unconsumed.extend(self.pending)
        return self.events, self.groups, self.unconsumed, self.end_of_log, self.notes, self.positions


def parse(text: bytes, resolve=None):
    """Parse ``mariadb-binlog -vv`` output.

    ``resolve(pending_positions, end_log_pos, label) -> index`` picks the pending ``# at``
    position a header belongs to (default 0, FIFO); pending positions before the chosen one
    were events that printed no header and end up in the third return value.
    """
    parser = _TextParser(resolve)
    for line in text.split(b"\n"):
        parser.line(line)
    return parser.finish()


# mariadb-binlog's messages for events it does not know; only then is --force-read used (on a
# truncated file --force-read makes it retry the same offset forever).
_UNKNOWN_EVENT_ERRORS = ("Found invalid event in binary log", "Found incompatible MySQL 8.0")


def run(path: str | os.PathLike, *, force_read: bool | None = None, resolve=None,
        start_position: int | None = None, timeout: float = 20) -> MBOutput:
    """Run ``mariadb-binlog`` on one file (TZ=UTC) and parse its output.

    ``force_read=None``: plain run, repeated with ``--force-read`` when mariadb-binlog stopped
    on an event type it does not know. ``--print-table-metadata`` is used unless it crashes
    mariadb-binlog (it does, SIGSEGV, on the metadata-less TABLE_MAPs of MySQL 5.1.5-5.1.17);
    ``MBOutput.table_metadata`` says which.
    """
    if MARIADB_BINLOG is None:
        raise FileNotFoundError("mariadb-binlog is not installed")
    env = dict(os.environ, TZ="UTC", LC_ALL="C")

    def once(force: bool, metadata: bool = True):
        # mariadb-binlog writes each LOAD DATA event's file (SQL_LOAD_MB-*) to --local-load (the
        # temp dir by default) and leaves it there.
        with tempfile.TemporaryDirectory(prefix="binlake-mb-load-") as local_load:
            cmd = [MARIADB_BINLOG, "--base64-output=decode-rows", "-vv", f"--local-load={local_load}"]
            if metadata:
                cmd.append("--print-table-metadata")
            if force:
                cmd.append("--force-read")
            if start_position is not None:
                cmd.append(f"--start-position={start_position}")
            cmd.append(os.fspath(path))
            return subprocess.run(cmd, capture_output=True, env=env, timeout=timeout, check=False)

    force = bool(force_read)
    metadata = True
    p = once(force)
    if p.returncode < 0:  # killed by a signal: the --print-table-metadata crash
        metadata = False
        p = once(force, False)
    if force_read is None and any(
            m in p.stderr.decode("utf-8", "replace") for m in _UNKNOWN_EVENT_ERRORS):
        force = True
        p = once(True, metadata)
    events, groups, unconsumed, end, notes, positions = parse(p.stdout, resolve)
    return MBOutput(os.fspath(path), p.returncode, p.stderr.decode("utf-8", "replace"),
                    events, groups, unconsumed, end, notes, force, positions, metadata)


# ------------------------------------------------------------------ value printing rules

def quote(raw: bytes) -> bytes:
    """``my_b_write_quoted``: bytes < 0x20 as ``\\xNN``, everything else verbatim, in quotes."""
    out = bytearray(b"'")
    for b in raw:
        if b > 0x1F:
            out.append(b)
        else:
            out += b"\\x%02x" % b
    out += b"'"
    return bytes(out)


def bits(raw: bytes, nbits: int) -> bytes:
    """``my_b_write_bit``: the low ``nbits`` bits of the big-endian bytes, as b'0101'."""
    v = int.from_bytes(raw, "big") if raw else 0
    return b"b'" + (format(v, f"0{nbits}b")[-nbits:] if nbits else "").encode() + b"'"


def signed_unsigned(value: int, nbits: int) -> bytes:
    """``my_b_write_sint32_and_uint32`` / LONGLONG: signed, then `` (unsigned)`` if negative."""
    u = value % (1 << nbits)
    s = u - (1 << nbits) if u >> (nbits - 1) else u
    return (b"%d" % s) + (b" (%d)" % u if s < 0 else b"")
