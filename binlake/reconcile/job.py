"""The reconcile job: meta.binlog_files -> meta.gtid_coverage + meta.gtid_reconciliation, without a JVM.

Reads the per-file facts ingestion stored (one small row per archived file; no binlog is
re-decoded) and the commit times of the coverage intervals' endpoints from silver.transactions,
runs the pure logic of :mod:`binlake.reconcile.coverage` and replaces both tables' rows for the
reconciled sources in one delta-rs commit each (:func:`binlake.lake.delta_tables.replace_rows`: tied to
the run by a Delta txn id and ``userMetadata``, under the S3 commit lock). Deterministic:
re-running on the same facts leaves both tables' rows unchanged.

Why plain Python: the data is metadata-sized (a few rows per archived file), so a Spark
application (a JVM start, a dozen tiny Spark jobs) cost a source's night far more than the work;
delta-rs reads and writes these rows in milliseconds (docs/architecture.md, "the JVM line").
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from binlake.config import BinlakeConfig
from binlake.errors import BinlakeError
from binlake.lake.ensure import ensure_registry_table
from binlake.lake.sql_text import DELTA_RS, sources_predicate
from binlake.lake.tables import table, table_location
from binlake.reconcile.coverage import FileFacts, coverage, reconcile
from binlake.run_ids import new_run_id

if TYPE_CHECKING:  # pragma: no cover
    from deltalake import DeltaTable

log = logging.getLogger("binlake.reconcile")

COVERAGE = "meta.gtid_coverage"
RECONCILIATION = "meta.gtid_reconciliation"
BINLOG_FILES = "meta.binlog_files"
TRANSACTIONS = "silver.transactions"

class ReconcileTableError(BinlakeError):
    """A reconcile output table that delta-rs cannot bring to binlake's layout."""


@dataclass
class ReconcileOutcome:
    """What one reconcile run did (the step turns it into its ``reconcile`` document)."""

    run_id: str
    sources: list[str] = field(default_factory=list)
    files: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    coverage_rows: int = 0
    problems: list[dict[str, Any]] = field(default_factory=list)  # non-OK rows, for logs / alerts
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# --------------------------------------------------------------------------- tables


def _open(cfg: BinlakeConfig, name: str) -> DeltaTable | None:
    from binlake.lake.delta_tables import open_delta_table

    return open_delta_table(table_location(cfg.warehouse, name), cfg.s3)


# --------------------------------------------------------------------------- reads


def load_file_facts(cfg: BinlakeConfig, sources: Iterable[str] | None = None) -> list[FileFacts]:
    """The facts of ``sources``' files (default: every source's) from meta.binlog_files."""
    import pyarrow.dataset as ds

    wanted = sorted(set(sources)) if sources is not None else None
    if wanted == []:
        return []
    facts = _open(cfg, BINLOG_FILES)
    if facts is None:
        return []
    data = facts.to_pyarrow_dataset()
    rows = data.to_table(filter=ds.field("source").isin(wanted) if wanted is not None else None).to_pylist()
    return [FileFacts.from_row(r) for r in rows]


def add_commit_times(cfg: BinlakeConfig, cov_rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each coverage interval with the commit times of its first and last transaction.

    Why from silver.transactions: meta.binlog_files knows each file's first/last event time
    only; an interval can start or end in the middle of a file. The endpoints' GTIDs (a few per
    source) are looked up in the sources' partitions; an endpoint whose transaction is not in
    silver (an archive that starts with a PREVIOUS_GTIDS of history) keeps NULL. The transaction's
    commit time, else its begin time; the earliest for a start, the latest for an end.
    """
    import pyarrow.dataset as ds

    txs = _open(cfg, TRANSACTIONS)
    if not cov_rows or txs is None:
        return cov_rows
    ends = {(r["source"], r["sid"].lower(), r["tag"], g) for r in cov_rows for g in (r["gno_start"], r["gno_end"])}
    gnos = sorted({e[3] for e in ends})
    where = (ds.field("source").isin(sorted({r["source"] for r in cov_rows}))
             & (ds.field("gno").isin(gnos) | ds.field("mariadb_seq_no").isin(gnos)))
    columns = ["source", "uuid", "mariadb_domain_id", "tag", "gno", "mariadb_seq_no", "commit_time", "begin_time"]
    times: dict[tuple[str, str | None, str, int], list[Any]] = {}
    for t in txs.to_pyarrow_dataset().to_table(columns=columns, filter=where).to_pylist():
        sid = t["uuid"] if t["uuid"] is not None else t["mariadb_domain_id"]
        gno = t["gno"] if t["gno"] is not None else t["mariadb_seq_no"]
        when = t["commit_time"] if t["commit_time"] is not None else t["begin_time"]
        key = (t["source"], str(sid).lower() if sid is not None else None, t["tag"] or "", gno)
        if key in ends and when is not None:
            times.setdefault(key, []).append(when)
    out = []
    for r in cov_rows:
        source, sid, tag = r["source"], r["sid"].lower(), r["tag"]
        starts, stops = times.get((source, sid, tag, r["gno_start"])), times.get((source, sid, tag, r["gno_end"]))
        out.append(dict(r, first_commit_time=min(starts) if starts else None,
                        last_commit_time=max(stops) if stops else None))
    return out


# --------------------------------------------------------------------------- the job


def _write(cfg: BinlakeConfig, name: str, table_now: DeltaTable, rows: Sequence[Mapping[str, Any]],
           sources: Sequence[str], *, run_id: str, txn_app: str) -> None:
    """Replace the sources' rows of ``name`` with ``rows`` in one delta-rs commit, typed by the table's
    own schema (TIMESTAMP: UTC microseconds)."""
    import pyarrow as pa

    from binlake.lake.delta_tables import Commit, replace_rows

    schema = pa.schema(table_now.schema().to_arrow())
    data = pa.Table.from_pylist([{c: r.get(c) for c in schema.names} for r in rows], schema=schema)
    location = table_location(cfg.warehouse, name)
    done = replace_rows(location, cfg.s3, data, sources_predicate(sources, DELTA_RS),
                        partition_by=table(name).partition_by, txn_app=txn_app,
                        user_metadata=json.dumps({"job": "reconcile", "run_id": run_id}, sort_keys=True))
    if done is Commit.LEFT_TO_SPARK:
        raise ReconcileTableError(f"{location}: table {name} has Delta protocol features this binlake does not "
                                  f"write (protocol {table_now.protocol()}); recreate it (reconcile rewrites it whole)")


def run_reconcile(cfg: BinlakeConfig, run_id: str | None = None, *,
                  sources: Iterable[str] | None = None) -> ReconcileOutcome:
    """Recompute coverage and reconciliation for ``sources`` (default: every ingested source)."""
    t0 = time.time()
    run_id = run_id or new_run_id()
    result = ReconcileOutcome(run_id=run_id)
    outputs = {name: ensure_registry_table(cfg, name) for name in (COVERAGE, RECONCILIATION)}
    facts = load_file_facts(cfg, sources)
    srcs = sorted({f.source for f in facts} | set(sources or ()))
    result.sources, result.files = srcs, len(facts)
    if not srcs:
        result.seconds = time.time() - t0
        return result
    recon_rows = [r.as_dict() for r in reconcile(facts)]
    cov_rows = add_commit_times(cfg, [c.as_dict() for c in coverage(facts)])
    for r in recon_rows:
        result.statuses[r["status"]] = result.statuses.get(r["status"], 0) + 1
        if r["status"] != "OK":
            result.problems.append({k: r[k] for k in ("source", "file", "status", "missing_gtids",
                                                      "extra_gtids", "missing_files", "detail")})
    result.coverage_rows = len(cov_rows)
    predicate = sources_predicate(srcs)
    txn_app = f"binlake-reconcile:{run_id}:{hashlib.sha1(predicate.encode()).hexdigest()[:12]}"
    for name, rows in ((COVERAGE, cov_rows), (RECONCILIATION, recon_rows)):
        _write(cfg, name, outputs[name], rows, srcs, run_id=run_id, txn_app=txn_app)
    result.seconds = time.time() - t0
    for p in result.problems:
        log.warning("gtid reconciliation %s/%s: %s %s", p["source"], p["file"], p["status"], p["detail"])
    return result
