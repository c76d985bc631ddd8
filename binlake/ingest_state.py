"""The ingestion state: ``meta.ingested_files``, the source of truth for what was ingested.

One row per (source, file), written by the ingest job (``spark_jobs.ingest.run_ingest``) in the
same run that writes the file's rows (replaced, never appended twice): uri, size, etag, status
(``ok`` / ``partial`` / ``failed``), the run id and the row counts. This module *reads* it:

* :func:`load_known_files` - ``file -> KnownFile`` for one source, joined with the closing
  facts of ``meta.binlog_files`` so discovery can skip re-reading unchanged, ingested objects.
  It works **without Spark** (the discover task runs in the Airflow worker): a small Delta log
  reader (:class:`DeltaSnapshotReader`: JSON commits + Parquet checkpoint, pyarrow for the data
  files) over :mod:`binlake.storage`. Tables using features it does not implement (deletion
  vectors, column mapping) make it return ``None`` and discovery simply reads every object.
* ``spark_jobs.ingest_state.known_files_spark`` - the same through Spark (tests cross-check it).
* :func:`plan_ingest` - which discovered files a run ingests: nightly (new / changed / failed
  before), backfill ``missing`` (the same, limited to a range) or ``reprocess`` (every closed file
  of the range, forced) - so reruns and backfills are idempotent, and a new etag is noticed.
"""

from __future__ import annotations

import json
import logging
import posixpath
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from binlake.discovery import DiscoveredFile, KnownFile, SourceDiscovery, select_range
from binlake.errors import BinlakeError
from binlake.tables import table

log = logging.getLogger(__name__)

INGESTED_FILES = "meta.ingested_files"
BINLOG_FILES = "meta.binlog_files"
MODES = ("nightly", "missing", "reprocess")


class UnsupportedDeltaTable(BinlakeError, RuntimeError):
    """The table uses a Delta feature the small reader does not implement."""


# --------------------------------------------------------------------------- a small Delta reader


class DeltaSnapshotReader:
    """Latest snapshot of a Delta table read straight from its ``_delta_log`` (no Spark).

    Enough for the small meta tables: replays the newest Parquet checkpoint and the JSON commits
    after it, keeps the live ``add`` files, reads them with pyarrow. Refuses (raises
    :class:`UnsupportedDeltaTable`) deletion vectors, column mapping and v2 checkpoints.
    """

    _SUPPORTED_READER_FEATURES = {"timestampNtz", "typeWidening", "vacuumProtocolCheck", "variantType"}

    def __init__(self, store: Any, table_path: str) -> None:
        self.store = store  # an ObjectStore rooted at the warehouse
        self.path = table_path.strip("/")

    def _log(self, name: str = "") -> str:
        return f"{self.path}/_delta_log/{name}"

    def exists(self) -> bool:
        return any(o.name.endswith(".json") for o in self.store.list(self._log()))

    def live_files(self) -> list[str]:
        objs = self.store.list(self._log())
        names = {o.name.rsplit("/", 1)[-1] for o in objs}
        version_cp = -1
        checkpoint: list[str] = []
        for n in names:
            if n.endswith(".checkpoint.parquet"):
                v = int(n.split(".", 1)[0])
                if v > version_cp:
                    version_cp, checkpoint = v, [n]
        multi: dict[int, list[str]] = {}
        for n in names:
            parts = n.split(".")
            if len(parts) == 5 and parts[1] == "checkpoint" and parts[4] == "parquet":
                multi.setdefault(int(parts[0]), []).append(n)
            elif len(parts) == 4 and parts[1] == "checkpoint" and parts[3] in ("json", "parquet"):
                raise UnsupportedDeltaTable("v2 checkpoint")
        for v, files in multi.items():
            if v > version_cp:
                version_cp, checkpoint = v, sorted(files)
        live: dict[str, dict[str, Any]] = {}
        for cp in checkpoint:
            for action in self._checkpoint_actions(cp):
                self._apply(live, action)
        commits = sorted((n for n in names if n.endswith(".json") and n.split(".")[0].isdigit()
                          and int(n.split(".")[0]) > version_cp), key=lambda n: int(n.split(".")[0]))
        for n in commits:
            for line in self.store.read_all(self._log(n)).decode().splitlines():
                if line.strip():
                    self._apply(live, json.loads(line))
        return sorted(live)

    def _checkpoint_actions(self, name: str) -> Iterable[dict[str, Any]]:
        import io

        import pyarrow.parquet as pq

        tbl = pq.read_table(io.BytesIO(self.store.read_all(self._log(name))))
        for row in tbl.to_pylist():
            yield {k: v for k, v in row.items() if v is not None}

    def _apply(self, live: dict[str, dict[str, Any]], action: Mapping[str, Any]) -> None:
        if "protocol" in action:
            feats = set(action["protocol"].get("readerFeatures") or [])
            bad = feats - self._SUPPORTED_READER_FEATURES
            if bad:
                raise UnsupportedDeltaTable(f"reader features {sorted(bad)}")
        elif "metaData" in action:
            conf = action["metaData"].get("configuration") or {}
            if isinstance(conf, list):  # a Parquet map (checkpoint) reads as [(key, value), ...]
                conf = dict(conf)
            if conf.get("delta.columnMapping.mode", "none") != "none":
                raise UnsupportedDeltaTable("column mapping")
        elif "add" in action:
            add = action["add"]
            if add.get("deletionVector"):
                raise UnsupportedDeltaTable("deletion vectors")
            live[unquote(add["path"])] = add
        elif "remove" in action:
            live.pop(unquote(action["remove"]["path"]), None)

    def read_rows(self, columns: Sequence[str] | None = None) -> list[dict[str, Any]]:
        import io

        import pyarrow.parquet as pq

        rows: list[dict[str, Any]] = []
        for rel in self.live_files():
            if "://" in rel or rel.startswith("/"):
                raise UnsupportedDeltaTable(f"absolute data file path {rel}")
            name = posixpath.normpath(f"{self.path}/{rel}")
            tbl = pq.read_table(io.BytesIO(self.store.read_all(name)))
            cols = [c for c in (columns or tbl.column_names) if c in tbl.column_names]
            rows.extend(tbl.select(cols).to_pylist())
        return rows


def _warehouse_store(cfg: Any) -> Any:
    from binlake.storage import open_object_store

    return open_object_store(cfg.warehouse.rstrip("/") + "/", cfg.s3)


def read_table_rows(cfg: Any, full_name: str, columns: Sequence[str] | None = None) -> list[dict[str, Any]] | None:
    """Rows of a warehouse Delta table without Spark; ``[]`` when absent, ``None`` when unsupported."""
    reader = DeltaSnapshotReader(_warehouse_store(cfg), table(full_name).path)
    try:
        if not reader.exists():
            return []
        return reader.read_rows(columns)
    except UnsupportedDeltaTable as exc:
        log.warning("cannot read %s without Spark (%s): discovery reads every object", full_name, exc)
        return None


# --------------------------------------------------------------------------- known files


def _known_from_rows(ingested: Iterable[Mapping[str, Any]], facts: Iterable[Mapping[str, Any]],
                     source: str) -> dict[str, KnownFile]:
    by_file = {r["file"]: r for r in facts if r.get("source") == source}
    out: dict[str, KnownFile] = {}
    for r in ingested:
        if r.get("source") != source:
            continue
        f = by_file.get(r["file"], {})
        # only facts gathered from the same bytes may stand in for reading the object
        same = f and (f.get("etag") or None) == (r.get("etag") or None)
        out[r["file"]] = KnownFile(
            etag=r.get("etag"), size=r.get("size"), status=r.get("status") or "ok",
            closing_event=f.get("closing_event") if same else None,
            next_file=f.get("next_file") if same else None,
            server_id=f.get("server_id") if same else None,
            flavor=f.get("flavor") if same else None,
            previous_gtids=f.get("previous_gtids_raw") or f.get("previous_gtids") if same else None,
        )
    return out


_INGESTED_COLS = ("source", "file", "etag", "size", "status", "run_id")
_FACT_COLS = ("source", "file", "etag", "closing_event", "next_file", "server_id", "flavor", "previous_gtids",
              "previous_gtids_raw")


def load_known_files(cfg: Any, source: str) -> dict[str, KnownFile] | None:
    """``file -> KnownFile`` for ``source`` read without Spark (None when the table can't be read)."""
    try:
        ingested = read_table_rows(cfg, INGESTED_FILES, _INGESTED_COLS)
        if ingested is None:
            return None
        facts = read_table_rows(cfg, BINLOG_FILES, _FACT_COLS) or []
    except Exception as exc:  # noqa: BLE001 - state is an optimisation here; the ingest job re-checks
        log.warning("ingestion state unreadable (%s: %s): treating every object as unknown", type(exc).__name__, exc)
        return None
    return _known_from_rows(ingested, facts, source)


# --------------------------------------------------------------------------- what a run ingests


@dataclass
class IngestPlan:
    """What one run ingests for one source, and why (JSON-able)."""

    source: str
    mode: str
    force: bool
    files: list[dict[str, Any]] = field(default_factory=list)   # source/file/uri/size/etag
    skipped: list[str] = field(default_factory=list)            # closed, already ingested
    reasons: dict[str, str] = field(default_factory=dict)       # file -> new/changed/retry/reprocess
    range: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"source": self.source, "mode": self.mode, "force": self.force, "files": self.files,
                "skipped": self.skipped, "reasons": self.reasons, "range": self.range}

def plan_ingest(discovery: SourceDiscovery, mode: str = "nightly", *, from_file: str | None = None,
                to_file: str | None = None, from_time: float | None = None,
                to_time: float | None = None) -> IngestPlan:
    """Choose the files to ingest from a discovery.

    ``nightly``: every closed file that is new, changed (etag/size) or failed before.
    ``missing``: the same, limited to the range. ``reprocess``: every closed file of the range,
    ingested again (``force``): its rows are replaced, so tables end up identical.
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    ranged = any(v is not None for v in (from_file, to_file, from_time, to_time))
    closed = discovery.closed_files
    chosen: list[DiscoveredFile] = (select_range(closed, from_file=from_file, to_file=to_file, from_time=from_time,
                                                 to_time=to_time) if ranged else closed)
    plan = IngestPlan(source=discovery.source, mode=mode, force=mode == "reprocess",
                      range={k: v for k, v in (("from_file", from_file), ("to_file", to_file),
                                               ("from_time", from_time), ("to_time", to_time)) if v is not None})
    for f in chosen:
        if mode == "reprocess":
            plan.files.append(f.ingest_item())
            plan.reasons[f.file] = "reprocess"
        elif f.ingest in ("new", "changed", "retry"):
            plan.files.append(f.ingest_item())
            plan.reasons[f.file] = str(f.ingest)
        else:
            plan.skipped.append(f.file)
    return plan
