"""ObjectStore backends: local folder and S3 (loopback moto server), ranged reads, byte counting."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

from binlake.config import S3Settings
from binlake.lake.storage import (
    DownloadError,
    LocalObjectStore,
    ObjectChangedError,
    ObjectNotFound,
    ObjectStore,
    S3ObjectStore,
    open_object_store,
)
from binlake_testing.fault_proxy import CutBodyProxy
from binlake_testing.s3server import S3Server

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
    from binlake.lake.storage import make_s3_client

    client = make_s3_client(S3Settings(endpoint_url=s3_server.endpoint_url, path_style_access=True, max_attempts=7))
    retries = client.meta.config.retries
    assert retries["mode"] == "standard" and retries["total_max_attempts"] == 7
    assert client.meta.endpoint_url == s3_server.endpoint_url


def test_s3_clients_are_shared_until_the_credentials_change(s3_server: S3Server,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from binlake.lake.storage import make_s3_client

    settings = S3Settings(endpoint_url=s3_server.endpoint_url, path_style_access=True)
    first = make_s3_client(settings)
    assert make_s3_client(S3Settings(endpoint_url=s3_server.endpoint_url, path_style_access=True)) is first
    assert make_s3_client(S3Settings(endpoint_url=s3_server.endpoint_url, path_style_access=True,
                                     max_attempts=9)) is not first
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "rotated-key")
    rotated = make_s3_client(settings)
    assert rotated is not first and rotated._request_signer._credentials.access_key == "rotated-key"  # noqa: SLF001


# -- a body dropped mid-stream: resumed where it broke, bounded ---------------------------------


def _cut_store(proxy: CutBodyProxy, bucket: str) -> S3ObjectStore:
    settings = S3Settings(endpoint_url=proxy.endpoint_url, path_style_access=True, max_attempts=3)
    return S3ObjectStore(f"s3://{bucket}/", settings, body_backoff=0.01)


def test_dropped_body_is_resumed_at_the_byte_where_it_broke(s3_server: S3Server, s3_bucket: str,
                                                             s3_client: Any) -> None:
    """A real cut: the proxy sends the headers and 70,000 body bytes, then closes (botocore:
    IncompleteReadError, which its own retries do not cover). Each new GET starts at the first
    byte not received and is pinned to the first response's ETag."""
    data = bytes(range(256)) * 1200  # 307,200 bytes
    s3_client.put_object(Bucket=s3_bucket, Key="x.bin", Body=data)
    with CutBodyProxy(s3_server.endpoint_url, cut_after=70_000, cut_bodies=2) as proxy:
        store = _cut_store(proxy, s3_bucket)
        assert store.read_range("x.bin", 1000, 250_000) == data[1000:250_000]
        assert store.bytes_read == 249_000  # every byte counted once
    assert [(r.range, r.cut) for r in proxy.requests] == [
        ("bytes=1000-249999", True), ("bytes=71000-249999", True), ("bytes=141000-249999", False)]


def test_a_body_cut_on_every_attempt_fails_after_the_bound(s3_server: S3Server, s3_bucket: str,
                                                           s3_client: Any) -> None:
    data = bytes(range(256)) * 1200
    s3_client.put_object(Bucket=s3_bucket, Key="x.bin", Body=data)
    with CutBodyProxy(s3_server.endpoint_url, cut_after=1_000, cut_bodies=1_000) as proxy:
        store = _cut_store(proxy, s3_bucket)
        with pytest.raises(DownloadError) as info:
            store.read_range("x.bin", 0, 100_000)
    assert len(proxy.requests) == store.body_attempts == 5
    assert [r.range for r in proxy.requests] == [f"bytes={i * 1000}-99999" for i in range(5)]
    assert str(info.value).startswith(f"s3://{s3_bucket}/x.bin: bytes 0-99999: the download broke off at "
                                      "byte 5000 on each of 5 attempts (IncompleteReadError")


def test_an_object_replaced_between_resumed_reads_is_not_stitched(s3_server: S3Server, s3_bucket: str,
                                                                  s3_client: Any) -> None:
    """The resumed GET carries If-Match: bytes of two versions are never mixed."""
    s3_client.put_object(Bucket=s3_bucket, Key="x.bin", Body=b"a" * 200_000)
    with CutBodyProxy(s3_server.endpoint_url, cut_after=50_000, cut_bodies=1) as proxy:
        store = _cut_store(proxy, s3_bucket)

        def replace_before_resume(params: dict[str, Any], **_: Any) -> None:
            if "IfMatch" in params:  # the resumed GET: the object changes just before it
                s3_client.put_object(Bucket=s3_bucket, Key="x.bin", Body=b"b" * 200_000)

        store.client.meta.events.register("provide-client-params.s3.GetObject", replace_before_resume)
        with pytest.raises(ObjectChangedError) as info:
            store.read_range("x.bin", 0, 200_000)
    first, now = hashlib.md5(b"a" * 200_000).hexdigest(), hashlib.md5(b"b" * 200_000).hexdigest()
    assert str(info.value) == (f's3://{s3_bucket}/x.bin changed while bytes 0-199999 were being read (ETag '
                               f'"{first}" when the read began, the store now has "{now}"): read it again')


def test_decode_reads_resume_after_dropped_bodies(s3_server: S3Server, s3_bucket: str, s3_client: Any) -> None:
    """The ingest job's executor-side read (spark_jobs.ingest.decode_piece, no Spark needed):
    two bodies cut mid-stream, the file still decodes whole, nothing quarantined."""
    from spark_jobs.ingest import decode_piece

    path = Path(__file__).parent / "fixtures" / "mariadb-10.11" / "binlog.000002"
    data = path.read_bytes()
    s3_client.put_object(Bucket=s3_bucket, Key="src/binlog.000002", Body=data)
    piece = {"source": "m", "file": "binlog.000002", "uri": f"s3://{s3_bucket}/src/binlog.000002",
             "size": len(data), "etag": None, "start": 0, "end": len(data), "range_index": 0, "n_ranges": 1}
    with CutBodyProxy(s3_server.endpoint_url, cut_after=20_000, cut_bodies=2) as proxy:
        s3 = {"endpoint_url": proxy.endpoint_url, "path_style_access": True, "max_attempts": 3}
        out = list(decode_piece(piece, s3=s3, keep_raw=False, run_id="r"))
    rows = {k: sum(b.num_rows for kind, b in out if kind == k) for k, _ in out if k != "file_facts"}
    assert "quarantine" not in rows and rows["events"] == 23
    assert [(r.range, r.cut) for r in proxy.requests] == [
        (f"bytes=0-{len(data) - 1}", True), (f"bytes=20000-{len(data) - 1}", True),
        (f"bytes=40000-{len(data) - 1}", False)]


def _conditional_writes(store: ObjectStore) -> None:
    """put_if_absent / put_if_match / delete_if_match: each refused (None / False) once the object
    is not what the writer expects, and the refused write leaves the object as it was."""
    first = store.put_if_absent("locks/x", b"one")
    assert first == store.head("locks/x").etag
    assert store.put_if_absent("locks/x", b"two") is None
    assert store.read_all("locks/x") == b"one"
    second = store.put_if_match("locks/x", b"second", first)
    assert second and second != first and store.read_all("locks/x") == b"second"
    assert store.put_if_match("locks/x", b"lagging", first) is None  # a writer holding the old version
    assert store.read_all("locks/x") == b"second"
    assert store.put_if_match("gone", b"z", second) is None  # no object: refused, nothing created
    with pytest.raises(ObjectNotFound):
        store.head("gone")
    assert store.delete_if_match("locks/x", first) is False
    assert store.read_all("locks/x") == b"second"
    assert store.delete_if_match("locks/x", second) is True
    with pytest.raises(ObjectNotFound):
        store.head("locks/x")
    assert store.delete_if_match("locks/x", second) is False
    assert store.put_if_absent("locks/x", b"again") is not None  # free again once deleted


def _one_creator_wins(store: ObjectStore) -> None:
    import concurrent.futures
    import threading

    barrier = threading.Barrier(6)

    def create(i: int) -> str | None:
        barrier.wait()  # all six at once
        return store.put_if_absent("race", f"writer {i}".encode())

    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        created = list(pool.map(create, range(6)))
    won = [i for i, etag in enumerate(created) if etag is not None]
    assert len(won) == 1 and store.read_all("race") == f"writer {won[0]}".encode()


def test_local_store_conditional_writes(tmp_path: Path) -> None:
    store = LocalObjectStore(tmp_path / "arch")
    _conditional_writes(store)
    _one_creator_wins(store)
    assert sorted(p.name for p in (tmp_path / "arch").rglob("*")) == ["locks", "race", "x"]  # no temp files left


def test_s3_store_conditional_writes(s3_server: S3Server, s3_bucket: str, s3_client: Any) -> None:
    settings = S3Settings(endpoint_url=s3_server.endpoint_url, path_style_access=True)
    store = S3ObjectStore(f"s3://{s3_bucket}/cond/", settings)
    sent: list[dict[str, Any]] = []
    store.client.meta.events.register("before-call.s3.PutObject", lambda params, **_: sent.append(params["headers"]))
    _conditional_writes(store)
    assert sent[0].get("If-None-Match") == "*" and sent[2].get("If-Match", "").startswith('"')
    _one_creator_wins(store)
    assert s3_client.get_object(Bucket=s3_bucket, Key="cond/locks/x")["Body"].read() == b"again"
