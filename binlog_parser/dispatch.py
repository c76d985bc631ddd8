"""The default type code -> body decoder table: core decoders merged with the rows decoders.

A module of its own so that the framing core can take a table without importing every
decoder (and the decoders never import the core).
"""

from __future__ import annotations

from binlog_parser.context import Decoder
from binlog_parser.decoders import CORE_DECODERS
from binlog_parser.rows import ROW_EVENT_DECODERS


def build_dispatch() -> dict[int, Decoder]:
    """Core decoders merged with the rows engineer's (rows decoders win for their codes)."""
    table: dict[int, Decoder] = dict(CORE_DECODERS)
    table.update(ROW_EVENT_DECODERS)
    return table
