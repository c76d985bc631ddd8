"""Benchmark: a year of small nights, with and without maintenance (issue 38).

    nice -n 10 .venv/bin/python bench/year.py [--nights 365] [--sources 2] [--every 7]
        [--workdir /tmp/binlake-year]

Each night appends, per source, one small data file to ``silver.row_changes`` (``--rows`` row
changes), ``meta.ingested_files`` and ``meta.binlog_files`` (one row each), as the nightly ingest
does (one commit per table and source), and MERGEs the night's changes (updates, inserts, a few
deletes of ``--touch`` keys) into one gold table keyed by ``id``. Two warehouses are written: one
never maintained, one maintained every ``--every`` nights by the real
``spark_jobs.maintenance.maintain_table`` (delta-rs: Z-order, VACUUM, checkpoint). At the end
the unmaintained one is measured, maintained once, and measured again.

Printed per table: live data files, bytes, ``_delta_log`` commit files, and the time of a typical
query (a night's row changes of one source and file_seq; one source's ingested files, as
reconciliation reads them; a gold point lookup), each the median of 5 runs through delta-rs'
Arrow dataset with the filter pushed down; and the gold MERGE's bytes written per night (mean of
the last ``--every`` nights).

Where it stops short of the pipeline: rows are written by delta-rs, not by the Spark ingest, and
the gold MERGE is delta-rs' (copy-on-write: it rewrites every file holding a touched key, as
Spark's MERGE without deletion vectors does), so the nights cost seconds instead of a JVM's
minutes and a year fits in one run. The rows' shape and the tables' partitioning, statistics
columns and maintenance are binlake's own.
"""

from __future__ import annotations

import argparse
import datetime as dt
import logging
import os
import random
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from binlake.config import BinlakeConfig, config_from_dict  # noqa: E402
from binlake.lake.delta_tables import add_actions, open_delta_table  # noqa: E402
from binlake.lake.maintenance import log_counts  # noqa: E402
from binlake.lake.tables import table_location  # noqa: E402

TABLES = ("silver.row_changes", "meta.ingested_files", "meta.binlog_files")
GOLD = "gold.bench__shop__orders"


def _config(root: Path) -> BinlakeConfig:
    return config_from_dict({"pipeline": {"warehouse": str(root / "warehouse"), "state_dir": str(root / "state")},
                             "maintenance": {"min_files": 4, "vacuum_retention_hours": 24, "max_run_hours": 24}},
                            base=root, env={})


def _create(cfg: BinlakeConfig) -> None:
    import pyarrow as pa
    from deltalake import DeltaTable

    from spark_jobs.lake import rows_table
    from spark_jobs.schemas import spec

    for name in TABLES:
        ts = spec(name)
        DeltaTable.create(table_location(cfg.warehouse, name), schema=rows_table(name, []).schema,
                          partition_by=list(ts.partition_by), configuration=ts.table.properties or None)
    schema = pa.schema([("id", pa.int64()), ("amount", pa.int64()), ("status", pa.string()),
                        ("note", pa.string()), ("_source", pa.string())])
    DeltaTable.create(table_location(cfg.warehouse, GOLD), schema=schema)


def _night_rows(name: str, source: str, night: int, rows: int, rng: random.Random) -> list[dict[str, Any]]:
    file, when = f"binlog.{night:06d}", dt.datetime(2025, 1, 1, tzinfo=dt.UTC) + dt.timedelta(days=night)
    base = {"source": source, "file": file, "file_seq": night, "run_id": f"night-{night}"}
    if name == "silver.row_changes":
        return [{**base, "pos": 4 + 300 * i, "payload_index": None, "row_index": 0, "db": "shop", "table_name": "orders",
                 "operation": rng.choice(("insert", "update", "delete")), "gtid": f"0-1-{night * rows + i}",
                 "commit_time": when, "commit_date": when.date(), "event_type": "UPDATE_ROWS_V2",
                 "before": None, "after": f'{{"id":{rng.randrange(10**6)}}}'}
                for i in range(rows)]
    if name == "meta.ingested_files":
        return [{**base, "uri": f"s3://a/{source}/{file}", "size": 1 << 20, "etag": f"e{night}", "status": "ok",
                 "events": rows * 3, "transactions": rows, "row_changes": rows, "statements": 0, "quarantined": 0}]
    return [{**base, "uri": f"s3://a/{source}/{file}", "size": 1 << 20, "flavor": "mariadb",
             "contained_gtids": f"0-1-{night * rows}-{night * rows + rows - 1}", "duplicate_gtids": "",
             "transactions": rows, "events": rows * 3, "truncated": False, "decoded_bytes": 1 << 20,
             "quarantined": 0, "ranges": 1}]


def _append_night(cfg: BinlakeConfig, sources: int, night: int, rows: int, rng: random.Random) -> None:
    from deltalake import write_deltalake

    from spark_jobs.lake import rows_table

    for s in range(sources):
        for name in TABLES:
            data = rows_table(name, _night_rows(name, f"src-{s}", night, rows, rng))
            write_deltalake(table_location(cfg.warehouse, name), data, mode="append")


def _gold_merge(cfg: BinlakeConfig, night: int, touch: int, ids: list[int], rng: random.Random) -> int:
    """The night's MERGE into the gold table; the bytes it wrote."""
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    location = table_location(cfg.warehouse, GOLD)
    if not ids:  # the first night: the table's starting rows
        ids.extend(range(20_000))
        write_deltalake(location, pa.table({"id": ids, "amount": [i % 97 for i in ids], "status": ["new"] * len(ids),
                                            "note": [f"order {i} of the first night" for i in ids],
                                            "_source": ["src-0"] * len(ids)}), mode="append")
        return 0
    updated = rng.sample(ids, touch)
    new = list(range(max(ids) + 1, max(ids) + 1 + touch // 2))
    gone = set(rng.sample(ids, max(1, touch // 20))) - set(updated)
    src = pa.table({"id": updated + new + sorted(gone),
                    "amount": [night] * (len(updated) + len(new)) + [0] * len(gone),
                    "status": ["paid"] * len(updated) + ["new"] * len(new) + ["gone"] * len(gone),
                    "note": [f"night {night}"] * (len(updated) + len(new) + len(gone)),
                    "_source": ["src-0"] * (len(updated) + len(new) + len(gone))})
    before = _live(location)[1]
    (DeltaTable(location).merge(src, "t.id = s.id", source_alias="s", target_alias="t")
     .when_matched_delete(predicate="s.status = 'gone'").when_matched_update_all(predicate="s.status <> 'gone'")
     .when_not_matched_insert_all(predicate="s.status <> 'gone'").execute())
    ids.extend(new)
    gone_set = set(gone)
    ids[:] = [i for i in ids if i not in gone_set]
    after_paths, _ = _live(location)
    return sum(size for path, size in after_paths.items() if path not in before)


def _live(location: str) -> tuple[dict[str, int], set[str]]:
    table = open_delta_table(location)
    assert table is not None
    adds = add_actions(table)
    paths = dict(zip(adds["path"], adds["size_bytes"], strict=True))
    return paths, set(paths)


def _median_seconds(query: Callable[[], Any], runs: int = 5) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        query()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _queries(cfg: BinlakeConfig, nights: int) -> dict[str, Callable[[], Any]]:
    import pyarrow.dataset as ds

    def scan(name: str, expr: Any) -> Callable[[], Any]:
        def run() -> Any:
            table = open_delta_table(table_location(cfg.warehouse, name))
            assert table is not None
            return table.to_pyarrow_dataset().to_table(filter=expr).num_rows
        return run

    day = nights // 2
    return {"silver.row_changes": scan("silver.row_changes", (ds.field("source") == "src-0") & (ds.field("file_seq") == day)),
            "meta.ingested_files": scan("meta.ingested_files", ds.field("source") == "src-0"),
            "meta.binlog_files": scan("meta.binlog_files", ds.field("source") == "src-0"),
            GOLD: scan(GOLD, ds.field("id") == 12_345)}


def measure(cfg: BinlakeConfig, nights: int, merge_bytes: list[int], every: int) -> dict[str, dict[str, Any]]:
    out = {}
    queries = _queries(cfg, nights)
    for name in (*TABLES, GOLD):
        location = table_location(cfg.warehouse, name)
        paths, _ = _live(location)
        entries, _since = log_counts(location, None)
        out[name] = {"files": len(paths), "bytes": sum(paths.values()), "log": entries,
                     "query_ms": round(_median_seconds(queries[name]) * 1000, 1)}
    tail = merge_bytes[-every:] or [0]
    out[GOLD]["merge_bytes_per_night"] = int(sum(tail) / len(tail))
    return out


def maintain(cfg: BinlakeConfig, run_id: str) -> float:
    from spark_jobs.maintenance import Target, maintain_table

    t0 = time.monotonic()
    for name in (*TABLES, GOLD):
        pk = ("id",) if name == GOLD else ()
        maintain_table(cfg, Target(name, table_location(cfg.warehouse, name), pk), run_id,
                       lambda: (_ for _ in ()).throw(RuntimeError("no Spark in this benchmark")))
    return time.monotonic() - t0


def simulate(root: Path, args: argparse.Namespace, every: int | None) -> tuple[BinlakeConfig, list[int], list[str]]:
    shutil.rmtree(root, ignore_errors=True)
    cfg = _config(root)
    _create(cfg)
    rng, ids, merge_bytes, trend = random.Random(38), list[int](), list[int](), list[str]()
    t0 = time.monotonic()
    for night in range(1, args.nights + 1):
        _append_night(cfg, args.sources, night, args.rows, rng)
        merge_bytes.append(_gold_merge(cfg, night, args.touch, ids, rng))
        if every and night % every == 0:
            maintain(cfg, f"weekly-{night}")
        if night % max(1, args.nights // 4) == 0 or night == args.nights:
            m = measure(cfg, night, merge_bytes, args.every)
            trend.append(f"night {night:4d} ({time.monotonic() - t0:6.0f} s): row_changes {m['silver.row_changes']['files']} "
                         f"files / {m['silver.row_changes']['log']} log, query {m['silver.row_changes']['query_ms']} ms; "
                         f"gold {m[GOLD]['files']} files, lookup {m[GOLD]['query_ms']} ms, "
                         f"MERGE {m[GOLD]['merge_bytes_per_night']} B/night")
            print(("weekly " if every else "never  ") + trend[-1], flush=True)
    return cfg, merge_bytes, trend


def table_lines(title: str, m: dict[str, dict[str, Any]]) -> list[str]:
    lines = [f"\n{title}", "| table | data files | bytes | _delta_log commits | query (ms) | MERGE bytes / night |",
             "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for name, v in m.items():
        lines.append(f"| {name} | {v['files']} | {v['bytes']:,} | {v['log']} | {v['query_ms']} | "
                     f"{v.get('merge_bytes_per_night', '')} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nights", type=int, default=365)
    parser.add_argument("--sources", type=int, default=2)
    parser.add_argument("--rows", type=int, default=200, help="row changes per night and source")
    parser.add_argument("--touch", type=int, default=60, help="gold keys a night's MERGE updates")
    parser.add_argument("--every", type=int, default=7, help="maintenance every N nights")
    parser.add_argument("--workdir", default="/tmp/binlake-year")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    os.environ.setdefault("BINLAKE_SOURCE_LEASE_TTL", "3600")
    work = Path(args.workdir)
    t0 = time.monotonic()
    never, never_bytes, _ = simulate(work / "never", args, None)
    before = measure(never, args.nights, never_bytes, args.every)
    seconds = maintain(never, "once")
    after = measure(never, args.nights, never_bytes, args.every)
    weekly, weekly_bytes, _ = simulate(work / "weekly", args, args.every)
    with_weekly = measure(weekly, args.nights, weekly_bytes, args.every)
    lines = [f"{args.nights} nights x {args.sources} sources, {args.rows} row changes per night and source, "
             f"gold MERGE of {args.touch} keys per night; {time.monotonic() - t0:.0f} s in all"]
    lines += table_lines("never maintained", before)
    lines += table_lines(f"after one maintenance run ({seconds:.1f} s)", after)
    lines += table_lines(f"maintained every {args.every} nights", with_weekly)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
