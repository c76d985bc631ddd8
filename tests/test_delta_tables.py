"""binlake.lake.delta_tables: one way to open a Delta table with delta-rs, and to replace a few rows with it, in a
folder and on loopback S3."""

from __future__ import annotations

import datetime as dt
import json
import logging
import threading
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from binlake.config import S3Settings
from binlake.lake.delta_files import DataFile, FileStats, partition_folder
from binlake.lake.delta_tables import (
    Commit,
    add_actions,
    append_files,
    delta_rs_writes,
    delta_uri,
    locked_storage_options,
    open_delta_table,
    replace_rows,
    storage_options,
)
from binlake.lake.sql_text import DELTA_RS, files_predicate
from binlake_testing.s3server import DUMMY_AWS_ENV, S3Server

ROWS = pa.table({"source": ["a", "b"], "n": [1, 2]})


def test_delta_uri_spells_every_s3_flavour_s3() -> None:
    assert delta_uri("s3a://bucket/wh/meta/x") == "s3://bucket/wh/meta/x"
    assert delta_uri("s3n://bucket/t") == "s3://bucket/t"
    assert delta_uri("s3://bucket/t") == "s3://bucket/t"
    assert delta_uri("/data/wh/meta/x") == "/data/wh/meta/x"


def test_storage_options_are_empty_for_a_folder_and_name_the_endpoint_for_s3(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret-example")
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    s3 = S3Settings(endpoint_url="http://127.0.0.1:9000", path_style_access=True, region="eu-west-1")
    assert storage_options(s3, "/data/wh") == {}
    assert storage_options(s3, "s3a://bucket/wh") == {
        "AWS_REGION": "eu-west-1", "AWS_ENDPOINT_URL": "http://127.0.0.1:9000", "AWS_ALLOW_HTTP": "true",
        "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "false", "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE",
        "AWS_SECRET_ACCESS_KEY": "secret-example"}


def test_open_delta_table_in_a_folder(tmp_path: Path) -> None:
    from deltalake import write_deltalake

    assert open_delta_table(str(tmp_path / "absent")) is None
    write_deltalake(str(tmp_path / "t"), ROWS)
    table = open_delta_table(str(tmp_path / "t"))
    assert table is not None and table.version() == 0
    assert table.to_pyarrow_table().sort_by("n").to_pydict() == {"source": ["a", "b"], "n": [1, 2]}


def test_reused_tables_are_opened_once_and_still_read_the_latest_version(tmp_path: Path) -> None:
    from deltalake import write_deltalake

    from binlake.lake.delta_tables import reused_delta_tables

    with reused_delta_tables():
        assert open_delta_table(str(tmp_path / "t")) is None  # absent: not kept, looked up again
        write_deltalake(str(tmp_path / "t"), ROWS)
        first = open_delta_table(str(tmp_path / "t"))
        write_deltalake(str(tmp_path / "t"), ROWS, mode="append")  # another writer's commit
        again = open_delta_table(str(tmp_path / "t"))
        assert again is first and again is not None and again.version() == 1 and again.to_pyarrow_table().num_rows == 4
    assert open_delta_table(str(tmp_path / "t")) is not first  # outside the block: a fresh open


def test_add_actions_name_each_data_file_with_its_partition_and_statistics(tmp_path: Path) -> None:
    from deltalake import DeltaTable, write_deltalake

    write_deltalake(str(tmp_path / "t"), ROWS, partition_by=["source"])
    actions = add_actions(DeltaTable(str(tmp_path / "t")))
    by_source = {s: (lo, hi) for s, lo, hi in zip(actions["partition.source"], actions["min.n"], actions["max.n"],
                                                  strict=True)}
    assert by_source == {"a": (1, 1), "b": (2, 2)}
    assert all(p.startswith("source=") for p in actions["path"])


@pytest.mark.parametrize("mode", ["process", "thread"])
def test_open_delta_table_on_loopback_s3_by_its_s3a_name(mode: str, s3_process: S3Server, s3_server: S3Server,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Also against moto served by a thread of this process (the session's server): delta-rs must
    not wait on S3 while holding the GIL (``is_deltatable`` did, and timed out after 180 s)."""
    from deltalake import write_deltalake

    for key, value in DUMMY_AWS_ENV.items():
        monkeypatch.setenv(key, value)
    server = s3_process if mode == "process" else s3_server
    s3_client = server.client()
    s3_bucket = f"delta-tables-{mode}"
    s3_client.create_bucket(Bucket=s3_bucket)
    s3 = S3Settings(endpoint_url=server.endpoint_url, path_style_access=True)
    location = f"s3a://{s3_bucket}/wh/meta/t"
    assert open_delta_table(location, s3) is None
    write_deltalake(delta_uri(location), ROWS, storage_options=dict(storage_options(s3, location),
                                                                     AWS_S3_ALLOW_UNSAFE_RENAME="true"))
    table = open_delta_table(location, s3)
    assert table is not None
    assert table.to_pyarrow_table(filters=[("source", "=", "b")]).to_pydict() == {"source": ["b"], "n": [2]}
    keys = [o["Key"] for o in s3_client.list_objects_v2(Bucket=s3_bucket, Prefix="wh/meta/t/_delta_log/")["Contents"]]
    assert keys == ["wh/meta/t/_delta_log/00000000000000000000.json"]


# ------------------------------------------------------------------ replace_rows (delta-rs writes)

FILE_ROWS = pa.schema([("source", pa.string()), ("file", pa.string()), ("n", pa.int64()),
                       ("at", pa.timestamp("us", tz="UTC"))])
AT = dt.datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=dt.UTC)


def _file_rows(rows: list[tuple[str, str, int]]) -> pa.Table:
    return pa.Table.from_pylist([{"source": s, "file": f, "n": n, "at": AT} for s, f, n in rows], schema=FILE_ROWS)


def _new_table(location: str, s3: S3Settings | None = None, **configuration: str) -> None:
    from deltalake import DeltaTable

    DeltaTable.create(delta_uri(location), schema=FILE_ROWS, partition_by=["source"],
                      configuration=configuration or None, storage_options=locked_storage_options(location, s3))


def _rows(location: str, s3: S3Settings | None = None) -> list[tuple[str, str, int, dt.datetime]]:
    table = open_delta_table(location, s3)
    assert table is not None
    return sorted((r["source"], r["file"], r["n"], r["at"]) for r in table.to_pyarrow_table().to_pylist())


def test_replace_rows_replaces_the_predicates_rows_once_per_transaction(tmp_path: Path) -> None:
    from deltalake import DeltaTable

    location = str(tmp_path / "t")
    _new_table(location, **{"delta.dataSkippingStatsColumns": "file"})
    awkward = "it's\\"  # a quote and a backslash: DataFusion's strings, not Spark's
    assert replace_rows(location, None, _file_rows([("a", "x", 1), ("a", awkward, 2), ("b", "x", 3)]),
                        files_predicate([("a", "x"), ("a", awkward), ("b", "x")], DELTA_RS), partition_by=["source"],
                        txn_app="app:run-1", user_metadata='{"run_id": "run-1"}') is Commit.COMMITTED
    # another run replaces a's awkward file only: the other rows stay
    assert replace_rows(location, None, _file_rows([("a", awkward, 20)]), files_predicate([("a", awkward)], DELTA_RS),
                        partition_by=["source"], txn_app="app:run-2") is Commit.COMMITTED
    assert _rows(location) == [("a", awkward, 20, AT), ("a", "x", 1, AT), ("b", "x", 3, AT)]
    table = DeltaTable(location)
    assert table.version() == 2
    assert (table.transaction_version("app:run-1"), table.transaction_version("app:run-2")) == (0, 0)
    assert [h.get("userMetadata") for h in table.history(2)] == [None, '{"run_id": "run-1"}']
    # run-1 again (a retried task, a killed run re-run): its commit is in the log, nothing written
    assert replace_rows(location, None, _file_rows([("a", "x", 99)]), files_predicate([("a", "x")], DELTA_RS),
                        partition_by=["source"], txn_app="app:run-1") is Commit.ALREADY_COMMITTED
    assert DeltaTable(location).version() == 2 and _rows(location)[1] == ("a", "x", 1, AT)
    # the table's statistics columns are kept, its schema and properties untouched
    assert set(add_actions(DeltaTable(location))) >= {"min.file", "max.file"}
    assert "min.n" not in add_actions(DeltaTable(location))
    assert DeltaTable(location).metadata().configuration == {"delta.dataSkippingStatsColumns": "file"}


def test_replace_rows_with_no_rows_removes_the_predicates_rows(tmp_path: Path) -> None:
    """Every file of a run failed: its meta.binlog_files rows go, the other files' rows stay."""
    location = str(tmp_path / "t")
    _new_table(location)
    replace_rows(location, None, _file_rows([("a", "x", 1), ("a", "y", 2)]), files_predicate([("a", "x"), ("a", "y")],
                 DELTA_RS), partition_by=["source"], txn_app="app:1")
    assert replace_rows(location, None, _file_rows([]), files_predicate([("a", "x")], DELTA_RS), partition_by=["source"],
                        txn_app="app:2") is Commit.COMMITTED
    assert _rows(location) == [("a", "y", 2, AT)]


def test_replace_rows_refuses_null_in_a_not_null_column(tmp_path: Path) -> None:
    from deltalake import DeltaTable, Schema

    location = str(tmp_path / "t")
    fields = [{"name": n, "type": t, "nullable": n == "n", "metadata": {}} for n, t in
              (("source", "string"), ("file", "string"), ("n", "long"))]
    DeltaTable.create(location, schema=Schema.from_json(json.dumps({"type": "struct", "fields": fields})),
                      partition_by=["source"])
    rows = pa.table({"source": ["a"], "file": pa.array([None], pa.string()), "n": [1]})
    with pytest.raises(Exception, match="failed validation"):  # noqa: PT011 - delta-rs's DeltaError
        replace_rows(location, None, rows, "source = 'a'", partition_by=["source"], txn_app="app:1")
    assert DeltaTable(location).version() == 0


def test_replace_rows_leaves_a_table_with_other_features_to_spark(tmp_path: Path,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    """An expected outcome, returned (not an exception outside the error root): the caller writes with Spark."""
    from deltalake import DeltaTable

    location = str(tmp_path / "t")
    _new_table(location, **{"delta.enableDeletionVectors": "true"})
    assert not delta_rs_writes(DeltaTable(location))
    with caplog.at_level(logging.INFO, logger="binlake.lake.delta_tables"):
        assert replace_rows(location, None, _file_rows([("a", "x", 1)]), "source = 'a'", partition_by=["source"],
                            txn_app="app:1") is Commit.LEFT_TO_SPARK
    assert "deletionVectors" in caplog.text and location in caplog.text
    assert DeltaTable(location).version() == 0
    _new_table(str(tmp_path / "plain"))
    assert delta_rs_writes(DeltaTable(str(tmp_path / "plain")))


def test_replace_rows_of_sources_written_at_once_all_land(tmp_path: Path) -> None:
    """Writers of different sources (the ingests of a fleet) commit the same local table at once:
    each commit lands (delta-rs retries a taken version; the partitions do not conflict)."""
    location = str(tmp_path / "t")
    _new_table(location)
    barrier = threading.Barrier(4)
    errors: list[BaseException] = []

    def write(source: str) -> None:
        barrier.wait()
        try:
            for n in range(3):
                replace_rows(location, None, _file_rows([(source, "f", n)]), files_predicate([(source, "f")], DELTA_RS),
                             partition_by=["source"], txn_app=f"app:{source}:{n}")
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(s,)) for s in "abcd"]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert _rows(location) == [(s, "f", 2, AT) for s in "abcd"]


def test_replace_rows_on_s3_holds_the_table_commit_lock(s3_process: S3Server, monkeypatch: pytest.MonkeyPatch) -> None:
    from binlake.lake import leases
    for key, value in DUMMY_AWS_ENV.items():
        monkeypatch.setenv(key, value)
    client = s3_process.client()
    client.create_bucket(Bucket="replace-rows")
    s3 = S3Settings(endpoint_url=s3_process.endpoint_url, path_style_access=True)
    location = "s3a://replace-rows/wh/meta/t"
    _new_table(location, s3)
    held: list[str] = []
    real = leases.table_commit_lock

    def watched(uri: str, settings: S3Settings | None) -> Any:
        held.append(uri)
        return real(uri, settings)

    monkeypatch.setattr(leases, "table_commit_lock", watched)
    assert replace_rows(location, s3, _file_rows([("a", "x", 1)]), files_predicate([("a", "x")], DELTA_RS),
                        partition_by=["source"], txn_app="app:s3") is Commit.COMMITTED
    assert replace_rows(location, s3, _file_rows([("a", "x", 2)]), files_predicate([("a", "x")], DELTA_RS),
                        partition_by=["source"], txn_app="app:s3") is Commit.ALREADY_COMMITTED
    assert held == [location, location]
    assert _rows(location, s3) == [("a", "x", 1, AT)]
    keys = [o["Key"] for o in client.list_objects_v2(Bucket="replace-rows")["Contents"]]
    assert [k for k in keys if "_binlake/locks" in k] == []  # released
    assert sorted(k for k in keys if "_delta_log" in k) == [
        f"wh/meta/t/_delta_log/{v:020d}.json" for v in (0, 1)]


# ------------------------------------------------------------------ append_files (data files written by binlake)


def _data_file(location: str, source: str, rows: list[tuple[str, int]], name: str) -> DataFile:
    """A Parquet file of ``rows`` written into the table's partition folder, as an ingest task does."""
    import pyarrow.parquet as pq

    data = pa.Table.from_pylist([{"file": f, "n": n, "at": AT} for f, n in rows], schema=FILE_ROWS.remove(0))
    folder = partition_folder(["source"], {"source": source})
    path = Path(location) / folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(data, path)
    stats = FileStats(data.schema)
    stats.note(data)
    return DataFile(f"{folder}/{name}", path.stat().st_size, {"source": source}, stats.to_json(pq.read_metadata(path)))


def test_append_files_commits_written_files_once_per_transaction(tmp_path: Path) -> None:
    from deltalake import DeltaTable

    location = str(tmp_path / "t")
    _new_table(location)
    files = [_data_file(location, "a", [("x", 1), ("y", 2)], "part-0.parquet"),
             _data_file(location, "b:1", [("x", 3)], "part-1.parquet")]
    assert append_files(location, None, files, partition_by=["source"], txn_app="app:run-1",
                        user_metadata='{"run_id": "run-1"}') is Commit.COMMITTED
    assert _rows(location) == [("a", "x", 1, AT), ("a", "y", 2, AT), ("b:1", "x", 3, AT)]
    table = DeltaTable(location)
    assert table.version() == 1 and table.transaction_version("app:run-1") == 0
    assert table.history(1)[0].get("userMetadata") == '{"run_id": "run-1"}'
    # the log names the files by URI (the folder's escape escaped), with their partition values and stats
    actions = add_actions(table)
    assert sorted(zip(actions["path"], actions["partition.source"], actions["min.file"], actions["max.n"],
                      strict=True)) == [("source=a/part-0.parquet", "a", "x", 2),
                                        ("source=b%253A1/part-1.parquet", "b:1", "x", 3)]
    # run-1 again: committed already, nothing added (a second add of the same files would double them)
    assert append_files(location, None, files, partition_by=["source"], txn_app="app:run-1") is Commit.ALREADY_COMMITTED
    assert DeltaTable(location).version() == 1 and len(_rows(location)) == 3


def test_append_files_refuses_nulls_in_a_not_null_column_and_other_features(tmp_path: Path) -> None:
    from deltalake import DeltaTable, Schema

    location = str(tmp_path / "t")
    fields = [{"name": n, "type": t, "nullable": n != "file", "metadata": {}} for n, t in
              (("source", "string"), ("file", "string"), ("n", "long"), ("at", "timestamp"))]
    DeltaTable.create(location, schema=Schema.from_json(json.dumps({"type": "struct", "fields": fields})),
                      partition_by=["source"])
    bad = _data_file(location, "a", [("x", 1)], "part-0.parquet")
    bad = DataFile(bad.path, bad.size, bad.partition_values, bad.stats.replace('"file":0', '"file":1'))
    with pytest.raises(ValueError, match="NULLs in NOT NULL column"):
        append_files(location, None, [bad], partition_by=["source"], txn_app="app:1")
    assert DeltaTable(location).version() == 0
    other = str(tmp_path / "dv")
    _new_table(other, **{"delta.enableDeletionVectors": "true"})
    assert append_files(other, None, [_data_file(other, "a", [("x", 1)], "p.parquet")], partition_by=["source"],
                        txn_app="app:1") is Commit.LEFT_TO_SPARK
    assert DeltaTable(other).version() == 0
