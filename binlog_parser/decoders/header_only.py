"""The header-only dispatch of :func:`binlog_parser.reader.scan_headers`: no body is decoded.

A module of its own (not in ``reader``) because the compiled framing loop
(``binlog_parser._native_framing``, imported by the framing core) must recognise
:func:`decode_header_only` in a framer's dispatch: it then builds the
:class:`HeaderOnlyEvent` itself, with no Python call and no body slice per event, which is what
makes the scan that plans file splits cheaper than a full decode.
"""

from __future__ import annotations

from dataclasses import dataclass

from binlog_parser.constants import EventType
from binlog_parser.context import DecodeContext, Decoder
from binlog_parser.decoders.control import decode_format_description, decode_start_v3
from binlog_parser.events import Event
from binlog_parser.header import EventHeader


@dataclass(frozen=True, slots=True)
class HeaderOnlyEvent(Event):
    """An event whose body was not decoded: only its :class:`EventHeader`."""


def decode_header_only(header: EventHeader, body: memoryview, ctx: DecodeContext) -> Event:
    """The body is left alone (a scan wants positions and types, not fields)."""
    return HeaderOnlyEvent(header)


#: Every code a header byte can hold, built once (a plain dict: the framing loops look codes up
#: in it directly). FORMAT_DESCRIPTION / START_V3 are still decoded: they define the framing.
HEADER_ONLY_DISPATCH: dict[int, Decoder] = {code: decode_header_only for code in range(256)}
HEADER_ONLY_DISPATCH[int(EventType.FORMAT_DESCRIPTION)] = decode_format_description
HEADER_ONLY_DISPATCH[int(EventType.START_V3)] = decode_start_v3
