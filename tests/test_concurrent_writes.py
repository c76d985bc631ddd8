"""Two sources written at the same moment into one warehouse: no Delta conflict, same tables as serial.

Reproduces what Airflow's real scheduler does with the per-source mapped task groups (decode and
reconcile of different sources running in parallel and writing the same Delta tables), without
Airflow: one thread per source on the shared SparkSession, started together by a barrier, each
running ``run_ingest`` then ``run_reconcile`` for its own source, into a fresh warehouse (so the
first-time table creation races too). Before the tables were partitioned by ``source`` this failed
with ``ConcurrentAppendException [DELTA_CONCURRENT_APPEND.WITHOUT_HINT]`` on the meta tables.
The tables must then equal a serial run's, row for row (order-independent checksums).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import make_test_config

from binlake.reconcile.job import run_reconcile
from binlake_testing.table_digest import warehouse_digests
from spark_jobs.ingest import BinlogObject, run_ingest
from spark_jobs.schemas import ALL_TABLES

pytestmark = [pytest.mark.spark, pytest.mark.timeout(2400)]  # 12.8 min for the module at load avg ~20

MARIA = Path(__file__).resolve().parent / "fixtures" / "mariadb-10.11"
SOURCES = ("alpha", "beta")


def _archive(root: Path, source: str, skip: str | None = None) -> list[BinlogObject]:
    folder = root / source
    folder.mkdir(parents=True, exist_ok=True)
    objs = []
    for p in sorted(MARIA.glob("binlog.0*")):
        if p.name == skip:
            continue
        data = p.read_bytes()
        (folder / p.name).write_bytes(data)
        objs.append(BinlogObject(source=source, uri=str(folder / p.name), size=len(data),
                                 etag=f"{source}/{p.name}/{len(data)}"))
    return objs


def _in_parallel(jobs: dict[str, Callable[[], Any]]) -> dict[str, BaseException]:
    """Run the jobs in one thread each, released together; the exceptions they raised, by name."""
    barrier = threading.Barrier(len(jobs))
    errors: dict[str, BaseException] = {}

    def run(name: str, job: Callable[[], Any]) -> None:
        barrier.wait()
        try:
            job()
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors[name] = exc

    threads = [threading.Thread(target=run, args=(n, j), name=f"writer-{n}") for n, j in jobs.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    return errors


@pytest.fixture(scope="module")
def archives(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[BinlogObject]]:
    root = tmp_path_factory.mktemp("archives")
    # beta misses a middle file: its reconciliation has a GAP, alpha's is clean
    return {"alpha": _archive(root, "alpha"), "beta": _archive(root, "beta", skip="binlog.000002")}


def _source_job(spark: Any, cfg: Any, objs: list[BinlogObject], run: str, *,
                force: bool = False) -> Callable[[], None]:
    def job() -> None:
        run_ingest(spark, cfg, objs, run, force=force)
        run_reconcile(cfg, run, sources=[objs[0].source])
    return job


@pytest.fixture(scope="module")
def serial(spark: Any, archives: dict[str, list[BinlogObject]], tmp_path_factory: pytest.TempPathFactory,
           s3_server: Any) -> tuple[Any, dict[str, Any]]:
    """One source after the other: the reference tables (config, digests)."""
    cfg = make_test_config(tmp_path_factory.mktemp("serial"), s3_server.endpoint_url)
    for source in SOURCES:
        _source_job(spark, cfg, archives[source], f"serial-{source}")()
    digests = warehouse_digests(cfg.warehouse, ALL_TABLES)
    assert digests["meta.gtid_reconciliation"].rows == 7  # 4 files of alpha, 3 of beta
    assert digests["bronze.events"].rows > 0 and digests["meta.gtid_coverage"].rows > 0
    return cfg, digests


def test_rerun_in_parallel_leaves_the_tables_unchanged(spark: Any, archives: dict[str, list[BinlogObject]],
                                                       serial: tuple[Any, dict[str, Any]]) -> None:
    """Tables exist: both sources re-ingested (forced) and reconciled at the same moment.

    The old layout (meta tables not partitioned) failed here with ConcurrentAppendException.
    """
    cfg, expected = serial
    errors = _in_parallel({s: _source_job(spark, cfg, archives[s], f"rerun-{s}", force=True) for s in SOURCES})
    assert not errors, f"concurrent writers failed: {errors!r}"
    assert warehouse_digests(cfg.warehouse, ALL_TABLES) == expected


def test_first_run_in_parallel_equals_a_serial_run(spark: Any, archives: dict[str, list[BinlogObject]],
                                                   serial: tuple[Any, dict[str, Any]],
                                                   tmp_path_factory: pytest.TempPathFactory, s3_server: Any) -> None:
    """A fresh warehouse: the tables' creation races too."""
    _, expected = serial
    cfg = make_test_config(tmp_path_factory.mktemp("parallel"), s3_server.endpoint_url)
    errors = _in_parallel({s: _source_job(spark, cfg, archives[s], f"first-{s}") for s in SOURCES})
    assert not errors, f"concurrent writers failed: {errors!r}"
    assert warehouse_digests(cfg.warehouse, ALL_TABLES) == expected


def test_old_unpartitioned_meta_table_is_repartitioned_once(spark: Any, tmp_path_factory: pytest.TempPathFactory,
                                                            s3_server: Any) -> None:
    """A warehouse from before the change: meta.gtid_coverage without partitions, rows kept."""
    from delta.tables import DeltaTable

    from spark_jobs.lake import ensure_table, rows_df, table_path
    from spark_jobs.schemas import spec

    cfg = make_test_config(tmp_path_factory.mktemp("old"), s3_server.endpoint_url)
    name = "meta.gtid_coverage"
    path = table_path(cfg, name)
    row = {"source": "alpha", "flavor": "mariadb", "sid": "0", "tag": "", "gno_start": 1, "gno_end": 9,
           "transactions": 9, "first_file": "binlog.000001", "last_file": "binlog.000004", "files": 4,
           "gtid_set": "0-1-1..9"}
    DeltaTable.create(spark).location(path).addColumns(spec(name).schema).execute()  # old layout
    rows_df(spark, name, [row]).write.format("delta").mode("append").save(path)
    before = warehouse_digests(cfg.warehouse, [name])

    ensure_table(spark, cfg, name)
    detail = DeltaTable.forPath(spark, path).detail().collect()[0]
    assert list(detail["partitionColumns"]) == ["source"]
    assert warehouse_digests(cfg.warehouse, [name]) == before and before[name].rows == 1
    version = DeltaTable.forPath(spark, path).history(1).collect()[0]["version"]
    ensure_table(spark, cfg, name)  # second call: nothing to do, no new commit
    assert DeltaTable.forPath(spark, path).history(1).collect()[0]["version"] == version
