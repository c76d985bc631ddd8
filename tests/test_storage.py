"""ObjectStore backends: local folder and S3 (loopback moto server), ranged reads, byte counting."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from binlake.config import S3Settings
from binlake.storage import (
    LocalObjectStore,
    ObjectNotFound,
    ObjectStore,
    S3ObjectStore,
    open_object_store,
)
from binlake.testing.s3server import S3Server

DATA = bytes(range(256)) * 4  # 1024 bytes


def _exercise(store: ObjectStore) -> None:
    store.put("a/binlog.000001", DATA)
    store.put("a/binlog.000002", b"xyz")
    store.put("b/other", b"1")
    names = [o.name for o in store.list()]
    assert names == ["a/binlog.000001", "a/binlog.000002", "b/other"]
    assert [o.name for o in store.list("a/")] == ["a/binlog.000001", "a/binlog.000002"]

    info = store.head("a/binlog.000001")
    assert info.size == 1024 and info.etag and info.key == info.name
    assert info.uri.endswith("a/binlog.000001")

    store.bytes_read = 0
    assert store.read_range("a/binlog.000001", 0, 4) == DATA[:4]
    assert store.read_range("a/binlog.000001", 1020, 2000) == DATA[1020:]
    assert store.read_range("a/binlog.000001", 10, 10) == b""
    assert store.read_tail("a/binlog.000001", 8) == DATA[-8:]
    assert store.read_tail("a/binlog.000002", 100) == b"xyz"
    assert store.bytes_read == 4 + 4 + 8 + 3
    assert store.read_all("a/binlog.000002") == b"xyz"
    assert store.bytes_read == 22

    with pytest.raises(ObjectNotFound):
        store.head("missing")
    with pytest.raises(ObjectNotFound):
        store.read_range("missing", 0, 1)
    with pytest.raises(ValueError):
        store.read_range("a/binlog.000001", 5, 1)


def test_local_store(tmp_path: Path) -> None:
    store = open_object_store(str(tmp_path / "arch"))
    assert isinstance(store, LocalObjectStore) and isinstance(store, ObjectStore)
    assert store.list() == []  # missing folder lists empty
    _exercise(store)
    with pytest.raises(ValueError):
        store.read_range("../escape", 0, 1)


def test_s3_store(s3_server: S3Server, s3_bucket: str) -> None:
    settings = S3Settings(endpoint_url=s3_server.endpoint_url, path_style_access=True)
    store = open_object_store(f"s3://{s3_bucket}/archive/", settings)
    assert isinstance(store, S3ObjectStore) and isinstance(store, ObjectStore)
    _exercise(store)
    assert store.head("b/other").uri == f"s3://{s3_bucket}/archive/b/other"
    assert store.read_range("a/binlog.000002", 10, 20) == b""  # past the end


def test_s3_store_paginates(s3_server: S3Server, s3_bucket: str, s3_client: Any) -> None:
    for i in range(7):
        s3_client.put_object(Bucket=s3_bucket, Key=f"p/f{i:02d}", Body=b"x" * i)
    s3_client.put_object(Bucket=s3_bucket, Key="p/folder/", Body=b"")  # folder marker: ignored
    settings = S3Settings(endpoint_url=s3_server.endpoint_url, path_style_access=True)
    store = S3ObjectStore(f"s3a://{s3_bucket}/p", settings, page_size=2)
    objs = store.list()
    assert [o.name for o in objs] == [f"f{i:02d}" for i in range(7)]
    assert [o.size for o in objs] == list(range(7))
    assert objs[0].uri == f"s3a://{s3_bucket}/p/f00"


def test_s3_client_uses_standard_retries(s3_server: S3Server) -> None:
    from binlake.storage import make_s3_client

    client = make_s3_client(S3Settings(endpoint_url=s3_server.endpoint_url, path_style_access=True, max_attempts=7))
    retries = client.meta.config.retries
    assert retries["mode"] == "standard" and retries["total_max_attempts"] == 7
    assert client.meta.endpoint_url == s3_server.endpoint_url
