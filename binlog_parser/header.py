"""The common event header shared by every event."""

from __future__ import annotations

import struct
from dataclasses import dataclass

#: the 19 bytes every event starts with, in this order: timestamp, type code, server id, event size,
#: log position, flags (EventHeader's fields after pos/next_pos); the reader, the writer and the
#: replication stream read or write it with this one struct
COMMON_HEADER = struct.Struct("<IBIIIH")


@dataclass(frozen=True, slots=True)
class EventHeader:
    """Where an event is and what its common header says.

    ``pos`` is the event's byte offset in its file; ``next_pos`` is ``pos + event_size``
    (computed, not trusted from ``log_pos``, which is 0 in some relay logs and is the
    payload's position for events embedded in a TRANSACTION_PAYLOAD). ``log_pos`` is the
    raw header field. ``checksum_ok`` is None when the file carries no checksums or they
    were not verified. ``payload_pos`` is set only on events embedded in a
    TRANSACTION_PAYLOAD (its ``pos``); such events report ``pos``/``next_pos`` as offsets
    inside the uncompressed payload, and the CLI prints the payload's ``pos``.
    ``raw_type_code`` is set only when the code on disk differs from ``type_code``: the
    pre-GA 5.1/5.2 "-a_drop" servers numbered events differently and MySQL maps them
    (``event_type_permutation``); ``type_code`` is then the standard code.
    """

    pos: int
    next_pos: int
    timestamp: int
    type_code: int
    server_id: int
    event_size: int
    log_pos: int
    flags: int
    checksum_ok: bool | None = None
    payload_pos: int | None = None
    raw_type_code: int | None = None


from binlog_parser._fast import slots_constructor  # noqa: E402

#: EventHeader(pos, next_pos, ..., raw_type_code) with every field given: the reader's hot loop
new_event_header = slots_constructor(EventHeader)
