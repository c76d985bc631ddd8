"""Reads pinned to what discovery saw (issue 43): every read of an archived binlog carries the ETag
the run's plan recorded (S3 ``If-Match``; a local file's size + mtime), so an object replaced
between discovery and decode, or between two ranges of a split file, is an error naming it, never
bytes recorded under the old ETag.

All against the loopback moto server (which answers ``If-Match`` on GET, ranged or whole, with 412
Precondition Failed) or a real local folder; the executor-side functions are called as Spark calls
them, without Spark. The whole ingest job (Spark) refusing such a file is in test_ingest.py, on
that module's warehouse.
"""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import Any

import pytest

from binlake.config import S3Settings
from binlake.discovery.discover import CHANGED_RETRIES, discover_source
from binlake.lake.storage import LocalObjectStore, ObjectChangedError, S3ObjectStore
from spark_jobs import ingest as ingest_mod

MARIA = Path(__file__).resolve().parent / "fixtures" / "mariadb-10.11"
#: the file discovery sees (73,944 bytes, ends with a ROTATE to binlog.000003), and what replaces it
#: under the same name (binlog.000001's 73,560 bytes: a valid binlog, other transactions)
SEEN = (MARIA / "binlog.000002").read_bytes()
OTHER = (MARIA / "binlog.000001").read_bytes()
#: the two ranges binlog.000002 is cut into with an 8,000-byte split target (test_ingest.py)
SPLIT_TARGET = 8_000


def _s3(endpoint: str) -> dict[str, Any]:
    return {"endpoint_url": endpoint, "path_style_access": True, "max_attempts": 3}


def _put(s3_client: Any, bucket: str, key: str, data: bytes) -> str:
    return str(s3_client.put_object(Bucket=bucket, Key=key, Body=data)["ETag"]).strip('"')


def _pieces(uri: str, size: int, etag: str | None, cuts: list[int]) -> list[dict[str, Any]]:
    bounds = [0, *cuts, size]
    return [{"source": "src", "file": uri.rsplit("/", 1)[-1], "uri": uri, "size": size, "etag": etag, "start": a,
             "end": b, "range_index": i, "n_ranges": len(bounds) - 1}
            for i, (a, b) in enumerate(zip(bounds, bounds[1:]))]


def _kinds(out: list[tuple[str, Any]]) -> dict[str, int]:
    return {k: sum(b.num_rows for kind, b in out if kind == k) for k, _ in out if k != "file_facts"}


# -- the stores -------------------------------------------------------------------------------------


def test_s3_reads_pinned_to_an_etag_refuse_another_version(s3_server: Any, s3_client: Any, s3_bucket: str) -> None:
    """Ranged, tail and whole GETs carry If-Match: the old ETag after a replacement is a 412, and
    the error names the object, both ETags and the bytes not read."""
    old = _put(s3_client, s3_bucket, "src/binlog.000002", SEEN)
    store = S3ObjectStore(f"s3://{s3_bucket}/src/", S3Settings(**_s3(s3_server.endpoint_url)))
    assert store.read_range("binlog.000002", 10, 20, etag=old) == SEEN[10:20]
    assert store.read_range("binlog.000002", 10, 20, etag=f'"{old}"') == SEEN[10:20]  # either spelling
    new = _put(s3_client, s3_bucket, "src/binlog.000002", OTHER)
    uri = f"s3://{s3_bucket}/src/binlog.000002"
    with pytest.raises(ObjectChangedError) as info:
        store.read_range("binlog.000002", 8_000, 73_944, etag=old)
    assert str(info.value) == (f'{uri} changed since discovery (ETag "{old}" expected, the store now has '
                               f'"{new}"); bytes 8000-73943 not read: re-run discovery')
    assert (info.value.uri, info.value.expected, info.value.found) == (uri, old, new)
    with pytest.raises(ObjectChangedError, match=r"; the last 512 bytes not read: re-run discovery$"):
        store.read_tail("binlog.000002", 512, etag=old)
    with pytest.raises(ObjectChangedError, match=r"; the whole object not read: re-run discovery$"):
        store.read_all("binlog.000002", etag=old)
    assert store.read_range("binlog.000002", 0, 4, etag=new) == OTHER[:4]
    # it crosses process boundaries (a Spark task's result) as itself
    again = pickle.loads(pickle.dumps(info.value))
    assert type(again) is ObjectChangedError and str(again) == str(info.value)


def test_a_local_file_is_checked_at_open_and_after_reading(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A local source's version is its size + mtime (the etag discovery records): a file
    replaced after discovery is refused at open; one rewritten in place while it is read is
    refused after the read."""
    (tmp_path / "binlog.000002").write_bytes(SEEN)
    store = LocalObjectStore(tmp_path)
    seen = store.head("binlog.000002").etag
    assert store.read_range("binlog.000002", 0, 100, etag=seen) == SEEN[:100]
    (tmp_path / "binlog.000002.new").write_bytes(OTHER)
    os.replace(tmp_path / "binlog.000002.new", tmp_path / "binlog.000002")
    now = store.head("binlog.000002").etag
    with pytest.raises(ObjectChangedError) as info:
        store.read_range("binlog.000002", 0, 100, etag=seen)
    assert str(info.value).startswith(f'{tmp_path}/binlog.000002 changed since discovery (identity (size, mtime) '
                                      f'"{seen}" expected, the store now has "{now}" (73560 bytes, modified ')
    assert str(info.value).endswith("); bytes 0-99 not read: re-run discovery")
    with pytest.raises(ObjectChangedError):
        store.read_tail("binlog.000002", 512, etag=seen)

    # rewritten in place during the read (the one double here: the write lands inside read())
    real_open = Path.open

    def open_then_append(path: Path, *args: Any, **kwargs: Any) -> Any:
        fh = real_open(path, *args, **kwargs)
        real_read = fh.read

        def read(n: int = -1) -> bytes:
            with real_open(path, "ab") as w:
                w.write(b"x")
            return real_read(n)

        fh.read = read
        return fh

    monkeypatch.setattr(Path, "open", open_then_append)
    with pytest.raises(ObjectChangedError, match=r"; bytes 0-99 not read: re-run discovery$"):
        store.read_range("binlog.000002", 0, 100, etag=now)
    with pytest.raises(ObjectChangedError, match=r"changed while bytes 0-99 were being read .*: read it again$"):
        store.read_range("binlog.000002", 0, 100)


# -- discovery ---------------------------------------------------------------------------------------


def test_discovery_reads_the_listed_version_or_looks_again(s3_server: Any, s3_client: Any, s3_bucket: str) -> None:
    """An object replaced between the listing and its head read: discovery's facts are never a mix
    of the listed ETag/size and the new bytes; it looks again and records the new version whole."""
    old = _put(s3_client, s3_bucket, "src/binlog.000002", SEEN)
    store = S3ObjectStore(f"s3://{s3_bucket}/src/", S3Settings(**_s3(s3_server.endpoint_url)))
    gets: list[str] = []

    def replace_before_first_get(params: dict[str, Any], **_: Any) -> None:
        gets.append(params.get("IfMatch", ""))
        if len(gets) == 1:  # binlog.000003's bytes: 1,933 of them, closed by a ROTATE to binlog.000004
            _put(s3_client, s3_bucket, "src/binlog.000002", (MARIA / "binlog.000003").read_bytes())

    store.client.meta.events.register("provide-client-params.s3.GetObject", replace_before_first_get)
    (f,) = discover_source(store, "src", workers=1).files
    new = s3_client.head_object(Bucket=s3_bucket, Key="src/binlog.000002")["ETag"].strip('"')
    assert gets[0] == f'"{old}"' and set(gets[1:]) == {f'"{new}"'}
    assert (f.etag, f.size, f.state, f.closing_event, f.next_file) == (new, 1933, "closed", "ROTATE",
                                                                       "binlog.000004")


def test_discovery_leaves_an_object_that_keeps_changing_for_the_next_run(s3_server: Any, s3_client: Any,
                                                                         s3_bucket: str) -> None:
    _put(s3_client, s3_bucket, "src/binlog.000002", SEEN)
    store = S3ObjectStore(f"s3://{s3_bucket}/src/", S3Settings(**_s3(s3_server.endpoint_url)))
    versions = iter([OTHER, SEEN] * 10)

    def replace_before_every_get(**_: Any) -> None:
        _put(s3_client, s3_bucket, "src/binlog.000002", next(versions))

    store.client.meta.events.register("provide-client-params.s3.GetObject", replace_before_every_get)
    r = discover_source(store, "src", workers=1)
    (f,) = r.files
    assert f.state == "open" and not r.to_ingest
    assert f.detail.startswith(f"replaced each of the {CHANGED_RETRIES + 1} times discovery read it (ETag now ")


# -- the decode step's executors, and the driver ------------------------------------------------------


def test_a_file_replaced_after_discovery_decodes_to_no_rows(s3_server: Any, s3_client: Any, s3_bucket: str) -> None:
    """decode_piece (executor side): the planned ETag is old, the store has other bytes: no row of
    any table, facts that carry the change, and the driver's refusal names the file."""
    old = _put(s3_client, s3_bucket, "src/binlog.000002", SEEN)
    new = _put(s3_client, s3_bucket, "src/binlog.000002", OTHER)
    uri = f"s3://{s3_bucket}/src/binlog.000002"
    (piece,) = _pieces(uri, len(SEEN), old, [])
    out = list(ingest_mod.decode_piece(piece, s3=_s3(s3_server.endpoint_url), keep_raw=False, run_id="r"))
    assert _kinds(out) == {}  # nothing for bronze, silver or quarantine
    ((kind, facts),) = out
    assert kind == "file_facts" and facts["read_failed"] and facts["events"] == 0
    assert (facts["changed"]["expected"], facts["changed"]["found"]) == (old, new)
    with pytest.raises(ObjectChangedError) as info:
        ingest_mod.refuse_changed_objects({("src", "binlog.000002"): [facts]})
    assert str(info.value) == (f'{uri} changed since discovery (ETag "{old}" expected, the store now has '
                               f'"{new}"); bytes 0-73943 not read: re-run discovery')


def test_a_file_replaced_between_two_ranges_is_refused(s3_server: Any, s3_client: Any, s3_bucket: str,
                                                       tmp_path: Path) -> None:
    """A split file: the header scan and range 0 read the planned version; the object is replaced;
    range 1 (a task of its own, as Spark runs it) reads nothing of the new bytes, and the run is
    refused before any table is written."""
    old = _put(s3_client, s3_bucket, "src/binlog.000002", SEEN)
    uri = f"s3://{s3_bucket}/src/binlog.000002"
    s3 = _s3(s3_server.endpoint_url)
    cuts = ingest_mod.scan_split_points(uri, len(SEEN), SPLIT_TARGET, s3, etag=old)
    assert len(cuts) == 1  # two ranges
    first, second = _pieces(uri, len(SEEN), old, cuts)
    settings = ingest_mod.TaskSettings(str(tmp_path / "staging"), s3, keep_raw=False, run_id="r")
    done0 = ingest_mod.decode_task((0, [first]), settings)
    assert done0["facts"][0]["events"] > 0 and not done0["facts"][0].get("changed")
    new = _put(s3_client, s3_bucket, "src/binlog.000002", OTHER)
    done1 = ingest_mod.decode_task((1, [second]), settings)
    (facts1,) = done1["facts"]
    assert facts1["events"] == 0 and facts1["changed"]["found"] == new
    assert done1["parts"] == {} and done1["files"] == {}  # not one row staged from the new bytes
    with pytest.raises(ObjectChangedError) as info:
        ingest_mod.refuse_changed_objects({("src", "binlog.000002"): done0["facts"] + done1["facts"]})
    assert str(info.value) == (f'{uri} changed since discovery (ETag "{old}" expected, the store now has '
                               f'"{new}"); bytes {cuts[0]}-73943 not read: re-run discovery')


def test_a_local_file_replaced_after_discovery_decodes_to_no_rows(tmp_path: Path) -> None:
    (tmp_path / "binlog.000002").write_bytes(SEEN)
    seen = LocalObjectStore(tmp_path).head("binlog.000002").etag
    (tmp_path / "binlog.000002.new").write_bytes(OTHER)
    os.replace(tmp_path / "binlog.000002.new", tmp_path / "binlog.000002")
    pieces = _pieces(str(tmp_path / "binlog.000002"), len(SEEN), seen, [SPLIT_TARGET * 9])
    for piece in pieces:
        out = list(ingest_mod.decode_piece(piece, s3=None, keep_raw=False, run_id="r"))
        assert _kinds(out) == {} and out[0][1]["changed"]["expected"] == seen
