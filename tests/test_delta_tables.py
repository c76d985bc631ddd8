"""binlake.delta_tables: one way to open a Delta table with delta-rs, in a folder and on loopback S3."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from binlake.config import S3Settings
from binlake.delta_tables import add_actions, delta_uri, open_delta_table, storage_options
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


def test_add_actions_name_each_data_file_with_its_partition_and_statistics(tmp_path: Path) -> None:
    from deltalake import DeltaTable, write_deltalake

    write_deltalake(str(tmp_path / "t"), ROWS, partition_by=["source"])
    actions = add_actions(DeltaTable(str(tmp_path / "t")))
    by_source = {s: (lo, hi) for s, lo, hi in zip(actions["partition.source"], actions["min.n"], actions["max.n"],
                                                  strict=True)}
    assert by_source == {"a": (1, 1), "b": (2, 2)}
    assert all(p.startswith("source=") for p in actions["path"])


@pytest.fixture(scope="module")
def s3_process() -> Iterator[S3Server]:
    """moto as its own process: delta-rs's requests would wait on an in-process server's GIL."""
    server = S3Server(mode="process").start()
    try:
        yield server
    finally:
        server.stop()


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
