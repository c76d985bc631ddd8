"""The common event header shared by every event."""

from __future__ import annotations

from dataclasses import dataclass


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


def _header_factory():
    """A positional EventHeader constructor for the reader's hot loop: the slots are set
    directly (about twice as fast as the frozen dataclass ``__init__``); same instances."""
    new = object.__new__
    cls = EventHeader
    setters = tuple(getattr(cls, f).__set__ for f in cls.__slots__)
    assert cls.__slots__ == ("pos", "next_pos", "timestamp", "type_code", "server_id",
                             "event_size", "log_pos", "flags", "checksum_ok", "payload_pos",
                             "raw_type_code")
    s0, s1, s2, s3, s4, s5, s6, s7, s8, s9, s10 = setters

    def make(pos, next_pos, timestamp, type_code, server_id, event_size, log_pos, flags,
             checksum_ok, payload_pos, raw_type_code):
        h = new(cls)
        s0(h, pos)
        s1(h, next_pos)
        s2(h, timestamp)
        s3(h, type_code)
        s4(h, server_id)
        s5(h, event_size)
        s6(h, log_pos)
        s7(h, flags)
        s8(h, checksum_ok)
        s9(h, payload_pos)
        s10(h, raw_type_code)
        return h
    return make


new_event_header = _header_factory()
