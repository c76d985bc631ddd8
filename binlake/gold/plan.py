"""Whether a gold table can be brought up to date incrementally, and why not (pure; no Spark).

Why a rule of its own: the incremental path (replay only the changes after the last one the gold
table includes, on the rows they touch) gives the full replay's result only under conditions that
must all be proven from what ``meta.gold_status`` and silver say; anything else replays the table in
full, and the status says why. The conditions (docs/gold.md, "Incremental replay"):

* the status row describes the table as it is: the gold table (and its ``__history`` table, when
  kept) is still at the Delta version the status row recorded — a run killed after its MERGE but
  before its status write fails this, so a committed MERGE is never applied twice;
* silver's part at or before the replayed-through coordinates W is exactly what was replayed: its
  row count and order-free hash sum equal the status row's fingerprint (an older file backfilled or
  a re-ingested file that changed breaks it; checked first, as the root cause when the backfilled
  file brings DDL too), and the schema history and seed are unchanged;
* no schema version lies after the first new change (no DDL in the new changes, none "older" than
  them), no TRUNCATE and no rename into the table lies after W (a resumed replay holds only the
  touched rows when it applies them), and the schema rows are converted with is the same (its
  digest; for a table without DDL, the best-informed TABLE_MAP may change with new files);
* every key value reads back from Delta as the replay's own value: a primary key exists (a table
  without one is keyed by full rows, ``_copies``) and no key column is FLOAT (float32 read back
  is not the decoder's double).

Where the incremental path is exact but the table is small (``[gold] incremental_min_changes``), the
full replay runs anyway: the incremental path's fixed cost (reading the touched rows back, a MERGE
of the gold table and one of its ``__history``) is more than replaying the whole of a small table
(docs/gold.md, "When", has the measurement behind the default).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from binlake.gold.schema_history import Coordinates, SchemaVersion, TableSchema
from binlake.gold.types import spark_type

#: ``meta.gold_status.replay`` values
FULL, INCREMENTAL, NONE = "full", "incremental", "none"
#: key column types whose value read back from Delta differs from the replay's own
INEXACT_KEY_TYPES = frozenset({"FLOAT", "ARRAY<FLOAT>"})


def schema_digest(schema: TableSchema) -> str:
    """A digest of everything about a schema that shapes converted values (names, types, charsets,
    members, defaults, key): equal digests convert every image alike."""
    text = json.dumps([[c.to_json() for c in schema.columns], list(schema.primary_key)], sort_keys=True)
    return hashlib.sha1(text.encode()).hexdigest()[:16]


def coordinates_text(at: Coordinates | None) -> str | None:
    """``meta.gold_status.replayed_through``: ``[file_seq, file, pos, payload_index, row_index]``."""
    if at is None:
        return None
    return json.dumps([at.file_seq, at.file, at.pos, at.payload_index, at.row_index])


def coordinates_of(text: str | None) -> Coordinates | None:
    if not text:
        return None
    file_seq, file, pos, payload_index, row_index = json.loads(text)
    return Coordinates(file_seq, pos, payload_index, row_index, file)


def stream_order(at: Coordinates) -> tuple[Any, ...]:
    """The order gold's stream is sorted in (``file_seq, file, pos, payload_index, row_index``), as
    Spark compares :func:`spark_jobs.gold.tables.stream_coordinates`; :class:`Coordinates`' own
    order puts ``file`` last."""
    return at.file_seq, at.file, at.pos, at.payload_index, at.row_index


def fingerprint(count: int, hash_sum: Any, schema: str, seed: str | None = None) -> str:
    """A table's input fingerprint: row changes (count, order-free hash sum), schema history digest,
    and the seed dump's digest."""
    return f"{count}:{hash_sum}:{schema}" + (f":seed {seed}" if seed else "")


@dataclass(frozen=True)
class ReplayState:
    """What a gold table holds according to its ``meta.gold_status`` row: the replay of every row
    change up to ``through`` (fingerprint ``fingerprint``), at Delta version ``table_version``."""

    fingerprint: str | None
    through: Coordinates | None
    table_version: int | None
    schema_digest: str | None
    history_version: int | None = None  # the __history table's, from its own status row
    changes: int = 0
    warnings: Mapping[str, int] | None = None
    last: tuple[Any, ...] | None = None
    table_map: str | None = None  # a table without DDL: its best-informed TABLE_MAP then (JSON)

    @classmethod
    def from_status(cls, row: Mapping[str, Any], history: Mapping[str, Any] | None) -> ReplayState:
        """From a status row (and the ``__history`` table's); columns an older binlake did not
        write read as None, which rules the incremental path out."""
        def get(r: Mapping[str, Any] | None, name: str) -> Any:
            return None if r is None or name not in r else r[name]

        return cls(get(row, "input_fingerprint"), coordinates_of(get(row, "replayed_through")),
                   get(row, "table_version"), get(row, "schema_digest"), get(history, "table_version"),
                   get(row, "changes") or 0, json.loads(row["warnings"]) if get(row, "warnings") else {},
                   (row["last_file"], row["last_pos"], row["last_gtid"], row["last_commit_time"]),
                   get(row, "table_map"))


@dataclass(frozen=True)
class TableInputs:
    """One table's silver row changes as the gold run's aggregate saw them: all of them (the
    fingerprint) and, split at the previous run's W, the old part's fingerprint and the first
    new change."""

    fingerprint: str
    old_fingerprint: str | None = None
    first_new: Coordinates | None = None
    changes: int = 0  # the table's row changes in silver


@dataclass(frozen=True)
class Versions:
    """Delta versions of a table's gold table and ``__history`` table now (None: absent)."""

    gold: int | None
    history: int | None


def old_part_unchanged(state: ReplayState, inputs: TableInputs | None) -> bool:
    """The changes at or before the state's W are those it was replayed from (count and hash sum)."""
    return (state.fingerprint is not None and inputs is not None and inputs.old_fingerprint is not None
            and _rows_part(inputs.old_fingerprint) == _rows_part(state.fingerprint))


def replay_reason(state: ReplayState | None, inputs: TableInputs, versions: Sequence[SchemaVersion],
                  final: TableSchema, now: Versions, *, keep_history: bool, force: bool = False,
                  min_changes: int = 0) -> str | None:
    """None when the table can be brought up to date incrementally; else why it is replayed in full
    (the text ``meta.gold_status.replay_reason`` shows). See the module doc for the rules; last, a
    table whose silver holds fewer than ``min_changes`` row changes in all (``[gold]
    incremental_min_changes``) is replayed in full even where the incremental path is exact."""
    reason = _why_not_incremental(state, inputs, versions, final, now, keep_history=keep_history, force=force)
    changes = change_count(inputs)
    if reason is None and changes < min_changes:
        return (f"a small table: {changes} row changes, fewer than [gold] incremental_min_changes "
                f"({min_changes}), so the full replay costs less")
    return reason


def change_count(inputs: TableInputs) -> int:
    """How many row changes silver holds for the table (the count part of its fingerprint)."""
    return int(inputs.fingerprint.split(":", 1)[0])


def _why_not_incremental(state: ReplayState | None, inputs: TableInputs, versions: Sequence[SchemaVersion],
                         final: TableSchema, now: Versions, *, keep_history: bool, force: bool) -> str | None:
    if force:
        return "forced"
    if state is None or state.fingerprint is None:
        return "no earlier replay of the table in meta.gold_status"
    if state.through is None or state.table_version is None or state.schema_digest is None:
        return "its status row has no replay state (written before incremental gold)"
    moved = _moved(state, now, keep_history)
    if moved:
        return moved
    if not final.primary_key:
        return "no primary key (rows are keyed by their full contents)"
    inexact = [c.name for c in final.columns if c.name in final.primary_key and spark_type(c) in INEXACT_KEY_TYPES]
    if inexact:
        return f"key column {', '.join(inexact)} is FLOAT (its float32 value read back from Delta is not the replay's)"
    if not old_part_unchanged(state, inputs):
        return "changes at or before the last replayed one differ (an older file backfilled or a file re-ingested)"
    if _schema_part(state.fingerprint) != _schema_part(inputs.fingerprint):
        return "schema history or seed changed (DDL)"
    if state.schema_digest != schema_digest(final):
        return "the schema rows are converted with changed (best-informed TABLE_MAP)"
    if inputs.first_new is None:
        return "no new changes after the last replayed one"
    moving = [v for v in versions if v.at > state.through and (v.truncated or v.renamed_from is not None)]
    if moving:  # the resumed replay would apply it before loading the held rows: only the full one is exact
        what = "TRUNCATE TABLE" if moving[0].truncated else f"a rename from {'.'.join(moving[0].renamed_from or ())}"
        return f"{what} lies after the last replayed change"
    late = [v.version for v in versions if v.at > inputs.first_new]
    if late:
        return f"schema version {late[0]} lies after the first new change"
    return None


def _moved(state: ReplayState, now: Versions, keep_history: bool) -> str | None:
    """Why the tables are not at the versions the status row recorded (None: they are)."""
    if now.gold is None:
        return "the gold table is missing"
    if now.gold != state.table_version:
        return (f"the gold table is at version {now.gold}, its status row says {state.table_version} "
                "(a run stopped after writing it?)")
    if keep_history and now.history is None:
        return "the __history table is missing"
    if keep_history and now.history != state.history_version:
        return (f"the __history table is at version {now.history}, its status row says {state.history_version} "
                "(a run stopped after writing it?)")
    return None


def _rows_part(fingerprint_text: str) -> str:
    """The row changes' part of a fingerprint: count and hash sum."""
    return ":".join(fingerprint_text.split(":", 2)[:2])


def _schema_part(fingerprint_text: str) -> str:
    """The schema history (and seed) part of a fingerprint (everything after count and hash)."""
    return fingerprint_text.split(":", 2)[2] if fingerprint_text.count(":") >= 2 else ""
