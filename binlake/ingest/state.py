"""The ingestion state: ``meta.ingested_files``, the source of truth for what was ingested.

One row per (source, file), written by the ingest job (``spark_jobs.ingest.run_ingest``) in the
same run that writes the file's rows (replaced, never appended twice): uri, size, etag, status
(``ok`` / ``partial`` / ``failed``), the run id and the row counts. This module *reads* it:

* :func:`load_known_files` - ``file -> KnownFile`` for one source, joined with the closing
  facts of ``meta.binlog_files`` so discovery can skip re-reading unchanged, ingested objects.
  It works **without Spark** (the discover task runs in the Airflow worker): delta-rs reads the
  tables (:mod:`binlake.lake.delta_tables`). A table it cannot read makes it return ``None`` and
  discovery simply reads every object.
* :func:`plan_ingest` - which discovered files a run ingests: nightly (new / changed / failed
  before), backfill ``missing`` (the same, limited to a range) or ``reprocess`` (every closed file
  of the range, forced) - so reruns and backfills are idempotent, and a new etag is noticed.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from binlake.discovery.discover import DiscoveredFile, KnownFile, SourceDiscovery, select_range
from binlake.lake.tables import table

if TYPE_CHECKING:
    from binlake.config import BinlakeConfig

log = logging.getLogger(__name__)

INGESTED_FILES = "meta.ingested_files"
BINLOG_FILES = "meta.binlog_files"
MODES = ("nightly", "missing", "reprocess")


def read_table_rows(cfg: BinlakeConfig, full_name: str, columns: Sequence[str] | None = None) -> list[dict[str, Any]] | None:
    """Rows of a warehouse Delta table without Spark (delta-rs); ``[]`` when absent, ``None`` when
    delta-rs cannot read it (discovery then reads every object, the ingest asks Spark)."""
    from binlake.lake.delta_tables import open_delta_table

    try:
        delta = open_delta_table(table(full_name).location(cfg.warehouse), cfg.s3)
        if delta is None:
            return []
        return list(delta.to_pyarrow_table(columns=list(columns) if columns else None).to_pylist())
    except Exception as exc:  # noqa: BLE001 - delta-rs errors (a feature it lacks, a torn read) are many types
        log.warning("cannot read %s without Spark (%s: %s)", full_name, type(exc).__name__, exc)
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


def load_known_files(cfg: BinlakeConfig, source: str) -> dict[str, KnownFile] | None:
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
