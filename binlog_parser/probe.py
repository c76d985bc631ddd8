"""Probing a binlog from a prefix and a tail, without the bytes in between (sans-I/O).

Why here and not in discovery: what the head of a binlog says (magic, FORMAT_DESCRIPTION,
PREVIOUS_GTIDS / GTID_LIST) and which event closes it (a ROTATE or STOP ending exactly at the
end of the object, trusted by its CRC32 or its ``log_pos``) is binlog format knowledge. It goes
through the parser's own framing core, header and CRC code (:mod:`binlog_parser.framing`), so
the rules exist once; the caller (``binlake.discovery``) only fetches the bytes asked for.

Every error names the file and the byte offset (:class:`~binlog_parser.errors.BinlogError`).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

from binlog_parser.constants import BINLOG_MAGIC, CHECKSUM_CRC32, LOG_EVENT_BINLOG_IN_USE_F, EventType
from binlog_parser.context import DecodeContext
from binlog_parser.dispatch import build_dispatch
from binlog_parser.errors import BinlogError, ChecksumMismatchError, NotABinlogError, TruncatedEventError
from binlog_parser.events import Event
from binlog_parser.framing import EventFramer, NeedData, crc32_trailer_ok, event_size_at

_ROTATE = int(EventType.ROTATE)
_STOP = int(EventType.STOP)
_FDE = int(EventType.FORMAT_DESCRIPTION)
_START_V3 = int(EventType.START_V3)
_PREVIOUS_GTIDS = int(EventType.PREVIOUS_GTIDS)
_GTID_LIST = int(EventType.MARIA_GTID_LIST)
#: Events that may sit between the FORMAT_DESCRIPTION and the PREVIOUS_GTIDS / GTID_LIST.
HEAD_EVENTS = frozenset({_FDE, _START_V3, _PREVIOUS_GTIDS, _GTID_LIST, int(EventType.MARIA_BINLOG_CHECKPOINT),
                         int(EventType.MARIA_START_ENCRYPTION), int(EventType.IGNORABLE)})

#: Body decoders for head and tail events (the decoder's default table; read-only here).
_DISPATCH = build_dispatch()


@dataclass(frozen=True)
class HeadNeedsMore:
    """The head events do not fit in the bytes read: the first ``needed`` bytes are needed."""

    needed: int


@dataclass(frozen=True)
class HeadFacts:
    """What the head of a binlog says (FORMAT_DESCRIPTION / START_V3, PREVIOUS_GTIDS / GTID_LIST)."""

    in_use: bool
    server_id: int
    server_version: str | None
    binlog_version: int | None
    create_timestamp: int | None
    fde_end: int
    previous_gtids: str | None
    checksum: str
    flavor: str


def parse_head(data: bytes, size: int, name: str) -> tuple[DecodeContext, HeadFacts] | HeadNeedsMore:
    """Decode the head of a binlog: the context plus its facts, or how many bytes it needs.

    The bytes go through the decoder's sans-I/O framing core: a :class:`NeedData` before the
    head events are complete becomes :class:`HeadNeedsMore`. Raises :class:`NotABinlogError`
    (no magic) or :class:`BinlogError` (corrupt head, or the object ends inside it).
    """
    if len(data) < 4 or data[:4] != BINLOG_MAGIC:
        if len(data) < 4 and BINLOG_MAGIC.startswith(bytes(data)) and size > len(data):
            return HeadNeedsMore(4)
        raise NotABinlogError(f"no binlog magic (starts with {bytes(data[:4]).hex() or 'nothing'})", file=name,
                              offset=0)
    framer = EventFramer(DecodeContext(file=name), _DISPATCH, expect_magic=True, first_position=0,
                         file_name=name, total_size=size, expand_payloads=False)
    framer.receive_data(data, 0)
    if len(data) >= size:
        framer.receive_eof()
    fde: Event | None = None
    previous_gtids = None
    try:
        for item in framer.events():
            if isinstance(item, NeedData):
                more = _head_needs_more(data, size, name, framer.position, fde is not None)
                if more is None:
                    break
                return more
            code = item.header.type_code
            if code in (_FDE, _START_V3):
                fde = item
            elif code == _PREVIOUS_GTIDS or code == _GTID_LIST:
                previous_gtids = str(item.gtid_set)  # type: ignore[attr-defined]
                break
            elif code not in HEAD_EVENTS:
                break
    except TruncatedEventError as exc:  # only with the whole object in hand
        pos = exc.offset if exc.offset is not None else len(data)
        _head_needs_more(data, size, name, pos, fde is not None)  # raises unless the head is complete
    if fde is None:
        raise NotABinlogError("no FORMAT_DESCRIPTION at the head", file=name, offset=4)
    return head_context(framer.context), _head_facts(fde, framer.context, previous_gtids)


def _head_needs_more(data: bytes, size: int, name: str, pos: int, fde_seen: bool) -> HeadNeedsMore | None:
    """The event at ``pos`` is cut by our window (or by the end of the object): None when it is
    an ordinary event after a complete head, else how many bytes the head needs."""
    code = data[pos + 4] if pos + 5 <= len(data) else None
    if fde_seen and code is not None and code not in HEAD_EVENTS:
        return None  # an ordinary event after the head: the head is complete
    event_size = event_size_at(data, pos)
    needed = pos + event_size if event_size is not None else pos + 64
    if len(data) >= size or needed > size:
        raise BinlogError("the object ends inside its head events", file=name, offset=pos)
    return HeadNeedsMore(max(needed, len(data) + 1))


def head_context(ctx: DecodeContext) -> DecodeContext:
    """A file's decoding context after its head, fresh of TABLE_MAPs (as :func:`parse_head` and
    :func:`binlog_parser.read_format_description` give it): a split of the file must start at a
    transaction boundary, which brings its own."""
    ctx.table_maps = {}
    ctx.table_map_cache = {}
    return ctx


def _head_facts(fde: Event, ctx: DecodeContext, previous_gtids: str | None) -> HeadFacts:
    return HeadFacts(
        in_use=bool(fde.header.flags & LOG_EVENT_BINLOG_IN_USE_F), server_id=fde.header.server_id,
        server_version=getattr(fde, "server_version", None), binlog_version=getattr(fde, "binlog_version", None),
        create_timestamp=getattr(fde, "create_timestamp", None), fde_end=fde.header.next_pos,
        previous_gtids=previous_gtids, checksum="CRC32" if ctx.checksum_alg == CHECKSUM_CRC32 else "OFF",
        flavor="mariadb" if ctx.is_mariadb else "mysql")


def _decode_at(data: bytes, pos: int, ctx: DecodeContext, name: str) -> list[Event]:
    """The events of ``data`` (file bytes from ``pos`` to the end of the object), framed by the
    decoder's sans-I/O core with a copy of the file's context."""
    c = copy.copy(ctx)
    c.table_maps = {}
    framer = EventFramer(c, _DISPATCH, expect_magic=False, first_position=pos, file_name=name,
                         total_size=pos + len(data), expand_payloads=False)
    framer.receive_data(data, pos)
    framer.receive_eof()
    return [item for item in framer.events() if not isinstance(item, NeedData)]


def find_closing_event(tail: bytes, tail_offset: int, size: int, ctx: DecodeContext,
                       name: str, min_pos: int = 4) -> tuple[str, str | None, int] | None:
    """The ROTATE/STOP event ending exactly at end of object: (type, next name, pos) or None.

    ``tail`` holds bytes ``[tail_offset, size)``. A candidate is an event header of type ROTATE
    or STOP whose ``event_size`` reaches exactly the end; it is decoded with ``binlog_parser``
    using the file's context and trusted only if its CRC32 matches (checksummed files) or, for
    files without checksums, its ``log_pos`` equals the object size.
    """
    n = len(tail)
    hl = ctx.header_length or 19
    for k in range(0, max(0, n - hl + 1)):
        code = tail[k + 4]
        if code != _ROTATE and code != _STOP:
            continue
        es = event_size_at(tail, k)
        if es is None or k + es != n or es < hl:
            continue
        pos = tail_offset + k
        if pos < min_pos:
            continue
        try:
            evs = _decode_at(tail[k:], pos, ctx, name)
        except ChecksumMismatchError:
            continue
        except BinlogError:
            # A ROTATE whose CRC is right but whose body the decoder refuses (e.g. no name):
            # a real closing event naming nothing usable, reported as such by the caller.
            if code == _ROTATE and ctx.checksum_alg == CHECKSUM_CRC32 and crc32_trailer_ok(tail[k:]):
                return "ROTATE", None, pos
            continue
        if len(evs) != 1:
            continue
        ev = evs[0]
        if ctx.checksum_alg != CHECKSUM_CRC32:
            # no CRC to trust: the header's end position must agree (0 in some old relay logs)
            if ev.header.log_pos not in (size,):
                continue
        if ev.header.type_code == _ROTATE:
            if getattr(ev, "artificial", False):
                continue
            return "ROTATE", getattr(ev, "next_file", None), pos
        return "STOP", None, pos
    return None




def rotate_name_length(size: int, rotate_pos: int, ctx: DecodeContext) -> int:
    """The length on disk of the name in the ROTATE at ``rotate_pos`` that ends the object at
    ``size``: the decoder keeps at most 511 bytes of it (as MySQL does), a hostile one may be longer."""
    return size - rotate_pos - ctx.header_length - 8 - (4 if ctx.checksum_alg == CHECKSUM_CRC32 else 0)
