"""Discovery: follow the ROTATE chain from heads and tails only; report instead of guessing."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from binlake.config import S3Settings
from binlake.discovery.discover import (
    HEAD_BYTES,
    MAX_TAIL_BYTES,
    TAIL_BYTES,
    KnownFile,
    ReplacedObjectError,
    discover_source,
    next_in_series,
    plain_file_name_problem,
    select_range,
)
from binlake.lake.storage import LocalObjectStore, S3ObjectStore
from tests._chain_util import (
    MARIADB_FILES,
    make_open,
    read_fixture,
    set_in_use,
    sparse_binlog,
    with_rotate_to,
    write_mariadb_chain,
)


def _chain_dir(tmp_path: Path, files: dict[str, bytes] | None = None) -> Path:
    d = write_mariadb_chain(tmp_path / "archive")
    for name, data in (files or {}).items():
        if data is None:
            (d / name).unlink()
        else:
            (d / name).write_bytes(data)
    return d


def _kinds(result: Any) -> dict[str, list[str | None]]:
    out: dict[str, list[str | None]] = {}
    for i in result.issues:
        out.setdefault(i.kind, []).append(i.file)
    return out


def test_series_names() -> None:
    assert next_in_series("binlog.000041") == "binlog.000042"
    assert next_in_series("mysql-bin.999999") == "mysql-bin.1000000"
    assert next_in_series("binlog.index") is None
    assert plain_file_name_problem("binlog.000002") is None
    for bad in ("", "../binlog.000002", "/etc/passwd", "a/b", "..", "x\x00y", "a\\b", ".hidden"):
        assert plain_file_name_problem(bad), bad


def test_fixture_chain_reads_heads_and_tails(tmp_path: Path) -> None:
    d = _chain_dir(tmp_path)
    (d / "binlog.index").write_text("./binlog.000001\n")
    store = LocalObjectStore(d)
    r = discover_source(store, "m")
    assert [f.file for f in r.to_ingest] == list(MARIADB_FILES)
    assert [f.chain_index for f in r.to_ingest] == [0, 1, 2, 3]
    assert [f.closing_event for f in r.to_ingest] == ["ROTATE", "ROTATE", "ROTATE", "STOP"]
    assert r.to_ingest[1].previous_gtids == "0-7-3" and r.to_ingest[0].flavor == "mariadb"
    assert not r.errors
    kinds = _kinds(r)
    assert kinds["not_a_binlog"] == ["binlog.index"]
    assert kinds["awaiting_successor"] == ["binlog.000004"]  # STOP -> binlog.000005, not archived yet
    # never more than a head and a tail per object
    sizes = {f.file: f.size for f in r.files}
    for f in r.files:
        assert f.head_bytes + f.tail_bytes <= min(sizes[f.file], HEAD_BYTES) + TAIL_BYTES
    assert r.bytes_read < sum(sizes.values()) / 3


def test_open_last_file_is_left_for_next_run(tmp_path: Path) -> None:
    d = _chain_dir(tmp_path, {"binlog.000004": make_open(read_fixture("binlog.000004"))})
    r = discover_source(LocalObjectStore(d), "m")
    f4 = next(f for f in r.files if f.file == "binlog.000004")
    assert f4.state == "open" and f4.in_use
    assert [f.file for f in r.to_ingest] == list(MARIADB_FILES[:3])
    assert _kinds(r)["open_file"] == ["binlog.000004"]
    assert not r.errors
    # in use but ending with STOP (flag not cleared yet): still open
    d2 = _chain_dir(tmp_path / "b", {"binlog.000004": set_in_use(read_fixture("binlog.000004"))})
    r2 = discover_source(LocalObjectStore(d2), "m")
    assert next(f for f in r2.files if f.file == "binlog.000004").state == "open"


def test_truncated_tail_and_fake_closing_event_are_not_trusted(tmp_path: Path) -> None:
    data = read_fixture("binlog.000002")
    cut = data[:-10]
    fake = with_rotate_to(data, "binlog.000003")
    fake = fake[:-1] + bytes([fake[-1] ^ 0xFF])  # CRC no longer matches
    d = _chain_dir(tmp_path, {"binlog.000003": cut[:len(cut)], "binlog.000004": None})
    (d / "binlog.000003").write_bytes(cut)
    (d / "binlog.000004").write_bytes(fake)
    r = discover_source(LocalObjectStore(d), "m")
    states = {f.file: f.state for f in r.files}
    assert states["binlog.000003"] == "open"
    assert states["binlog.000004"] == "open"
    assert "unclosed_file" in _kinds(r)  # 000003 is open although 000004 exists
    assert [f.file for f in r.to_ingest] == ["binlog.000001", "binlog.000002"]


def test_missing_middle_file_is_a_gap(tmp_path: Path) -> None:
    d = _chain_dir(tmp_path, {"binlog.000003": None})
    r = discover_source(LocalObjectStore(d), "m")
    kinds = _kinds(r)
    assert kinds["missing_successor"] == ["binlog.000002"]
    err = next(i for i in r.issues if i.kind == "missing_successor")
    assert "binlog.000003 is missing" in err.detail and err.severity == "error"
    assert "chain_restart" not in kinds  # the file after the gap is explained by the gap
    assert [f.file for f in r.to_ingest] == ["binlog.000001", "binlog.000002", "binlog.000004"]
    assert r.chain_broken


@pytest.mark.parametrize("name", ["../binlog.000003", "/etc/passwd", "", "sub/binlog.000003", "bin\x00log"])
def test_hostile_rotate_name_is_rejected(tmp_path: Path, name: str) -> None:
    d = _chain_dir(tmp_path, {"binlog.000002": with_rotate_to(read_fixture("binlog.000002"), name)})
    r = discover_source(LocalObjectStore(d), "m")
    f2 = next(f for f in r.files if f.file == "binlog.000002")
    assert f2.state == "rejected"
    assert _kinds(r)["hostile_rotate"] == ["binlog.000002"]
    assert "binlog.000002" not in [f.file for f in r.to_ingest]
    assert r.chain_broken


def test_fork_and_restart(tmp_path: Path) -> None:
    d = _chain_dir(tmp_path)
    # a copy of 000002 under another name: two files claim binlog.000003 as successor
    (d / "binlog.000002.bak").write_bytes(read_fixture("binlog.000002"))
    # a new server (other basename) starting its own series
    (d / "other-bin.000001").write_bytes(with_rotate_to(read_fixture("binlog.000001"), "other-bin.000002"))
    r = discover_source(LocalObjectStore(d), "m")
    kinds = _kinds(r)
    assert kinds["fork"] == ["binlog.000003"]
    fork = next(i for i in r.issues if i.kind == "fork")
    assert "binlog.000002" in fork.detail and "binlog.000002.bak" in fork.detail
    assert kinds["chain_restart"] == ["other-bin.000001"]  # the .bak copy is reported once, as the fork


def test_changed_object_and_known_state(tmp_path: Path) -> None:
    d = _chain_dir(tmp_path)
    store = LocalObjectStore(d)
    first = discover_source(store, "m")
    known = {f.file: KnownFile(etag=f.etag, size=f.size, status="ok", closing_event=f.closing_event,
                               next_file=f.next_file) for f in first.to_ingest}
    known["binlog.000002"] = KnownFile(etag="old-etag", size=known["binlog.000002"].size,
                                       closing_event="ROTATE", next_file="binlog.000003")
    known["binlog.000003"] = KnownFile(etag=known["binlog.000003"].etag, size=known["binlog.000003"].size,
                                       status="failed", closing_event="ROTATE", next_file="binlog.000004")
    store.reset_counter()
    r = discover_source(store, "m", known=known)
    ingest = {f.file: f.ingest for f in r.files if f.closed}
    assert ingest == {"binlog.000001": "ingested", "binlog.000002": "changed", "binlog.000003": "retry",
                      "binlog.000004": "ingested"}
    assert [f.file for f in r.to_ingest] == ["binlog.000002", "binlog.000003"]
    assert _kinds(r)["changed_object"] == ["binlog.000002"]
    reused = {f.file for f in r.files if f.from_state}
    assert reused == {"binlog.000001", "binlog.000004"}  # unchanged + known: not read again
    assert not r.errors and [f.chain_index for f in r.closed_files] == [0, 1, 2, 3]


def test_select_range(tmp_path: Path) -> None:
    r = discover_source(LocalObjectStore(_chain_dir(tmp_path)), "m")
    sel = select_range(r.files, from_file="binlog.000002", to_file="binlog.000003")
    assert [f.file for f in sel] == ["binlog.000002", "binlog.000003"]
    assert [f.file for f in select_range(r.files, from_file="binlog.000004")] == ["binlog.000004"]


def _sparse_chain(folder: Path, n: int, size: int) -> int:
    head_src = read_fixture("binlog.000002")
    for i in range(1, n + 1):
        nxt = f"binlog.{i + 1:06d}" if i < n else None
        sparse_binlog(folder / f"binlog.{i:06d}", head_src, size, nxt)
    return n * size


def test_10k_objects_read_only_heads_and_tails(tmp_path: Path) -> None:
    n, size = 10_000, 1 << 20
    folder = tmp_path / "big"
    folder.mkdir()
    total = _sparse_chain(folder, n, size)
    store = LocalObjectStore(folder)
    t0 = time.monotonic()
    r = discover_source(store, "big", workers=8)
    elapsed = time.monotonic() - t0
    assert r.objects == n and not r.errors
    assert len(r.to_ingest) == n
    assert r.to_ingest[-1].closing_event == "STOP" and r.to_ingest[-1].chain_index == n - 1
    # one head (4 KiB) and one tail (512 B) per object: nothing else
    assert r.bytes_read == store.bytes_read == n * (HEAD_BYTES + TAIL_BYTES)
    assert r.bytes_read < total / 200
    print(f"\n10k discovery: {r.bytes_read} bytes read of {total} ({elapsed:.1f}s)")


def test_s3_paging_and_ranged_reads(s3_server: Any, s3_client: Any, s3_bucket: str, tmp_path: Path) -> None:
    """A real S3 API on loopback, listing paged by 100: same chain facts, ranged GETs only."""
    n, size = 250, 64 << 10
    folder = tmp_path / "s3src"
    folder.mkdir()
    _sparse_chain(folder, n, size)
    for p in sorted(folder.iterdir()):
        s3_client.upload_file(str(p), s3_bucket, f"srv1/{p.name}")
    s3_client.put_object(Bucket=s3_bucket, Key="srv1/notes.txt", Body=b"hello")
    settings = S3Settings(endpoint_url=s3_server.endpoint_url, path_style_access=True, max_attempts=3)
    store = S3ObjectStore(f"s3://{s3_bucket}/srv1/", settings, page_size=100)
    calls: list[str] = []
    store.client.meta.events.register("before-call.s3.ListObjectsV2", lambda **kw: calls.append("list"))
    r = discover_source(store, "srv1", workers=8)
    assert len(calls) == 3  # 251 objects, 100 per page
    assert r.objects == n + 1 and len(r.to_ingest) == n and not r.errors
    assert _kinds(r)["not_a_binlog"] == ["notes.txt"]
    assert r.bytes_read == n * (HEAD_BYTES + TAIL_BYTES) + 5


@pytest.mark.parametrize("faults", [("missing_file", "duplicate_file", "in_use_last"),
                                    ("restart", "truncated_tail"), ()])
def test_synthetic_archive_matches_ground_truth(tmp_path: Path, faults: tuple[str, ...]) -> None:
    """Generated chains (binlake_testing.synthetic, MySQL 8 format): discovery's view of every file agrees
    with the generator's ground truth, and each fault is reported as the right kind."""
    from binlake_testing.synthetic import Faults, SyntheticConfig, generate

    truth = generate(str(tmp_path), SyntheticConfig(bytes_per_server=320 << 10, max_binlog_size=64 << 10,
                                                    faults=Faults.parse(list(faults)), seed=7))
    (src, facts), = truth["sources"].items()
    r = discover_source(LocalObjectStore(tmp_path / src), src)
    seen = {f.file: f for f in r.files}
    for tf in facts["files"]:
        if not tf["present"]:
            assert tf["name"] not in seen
            continue
        f = seen[tf["name"]]
        if tf["in_use"] or tf["truncated"] or tf["closing_event"] is None:
            assert f.state == "open", (tf, f)
        else:
            assert f.state == "closed" and f.closing_event == tf["closing_event"], (tf, f)
            if tf["closing_event"] == "ROTATE":
                assert f.next_file == tf["next_file"]
    kinds = _kinds(r)
    if "missing_file" in faults:
        missing = next(tf["name"] for tf in facts["files"] if not tf["present"])
        gap = next(i for i in r.issues if i.kind == "missing_successor")
        assert f"{missing} is missing" in gap.detail
    if "duplicate_file" in faults:
        assert "fork" in kinds
    if not faults or faults == ("restart", "truncated_tail"):
        assert not r.errors, r.errors
    last = max((tf for tf in facts["files"] if tf["present"] and not tf["name"].endswith(".copy")),
               key=lambda tf: tf["name"])
    if last["in_use"] or last["truncated"]:
        assert kinds["open_file"] == [last["name"]]
        assert last["name"] not in [f.file for f in r.to_ingest]


def test_rotate_with_a_600_byte_name_is_reported_as_over_long(tmp_path: Path) -> None:
    """The ROTATE (19 + 8 + 600 + 4 bytes) does not fit the first 512-byte tail read: the tail is
    extended (bounded) until the last event is found by its own size, and the name is rejected as
    the over-long name it is, not reported as a file without a closing event."""
    name = "binlog.000003" + "x" * 587
    d = _chain_dir(tmp_path, {"binlog.000002": with_rotate_to(read_fixture("binlog.000002"), name)})
    r = discover_source(LocalObjectStore(d), "m")
    f2 = next(f for f in r.files if f.file == "binlog.000002")
    assert (f2.state, f2.closing_event) == ("rejected", "ROTATE")
    kinds = _kinds(r)
    assert kinds["hostile_rotate"] == ["binlog.000002"] and "unclosed_file" not in kinds
    (issue,) = [i for i in r.issues if i.kind == "hostile_rotate"]
    assert "over-long file name (600 bytes, limit 255): 'binlog.000003xxx" in issue.detail
    assert f2.tail_bytes == min(f2.size, MAX_TAIL_BYTES) == 64 << 10  # 512 B, then the rest of 64 KiB
    assert "binlog.000002" not in [f.file for f in r.to_ingest]
    # closed files with ordinary names still cost one 512-byte tail read
    assert next(f for f in r.files if f.file == "binlog.000001").tail_bytes == TAIL_BYTES
    assert plain_file_name_problem("b" * 256) == f"over-long file name (256 bytes, limit 255): {'b' * 32!r}..."
    assert plain_file_name_problem("binlog." + "1" * 248) is None


def _known_after_first_run(store: LocalObjectStore) -> dict[str, KnownFile]:
    first = discover_source(store, "m")
    return {f.file: KnownFile(etag=f.etag, size=f.size, status="ok", closing_event=f.closing_event,
                              next_file=f.next_file) for f in first.to_ingest}


def test_replaced_object_policy_reingest_or_fail(tmp_path: Path) -> None:
    """An ingested object rewritten with other content (one byte of binlog.000002 changed):
    ``reingest`` warns and ingests it again, ``fail`` raises a ReplacedObjectError naming the
    object and both etag/size pairs, and ingests nothing of it."""
    d = _chain_dir(tmp_path)
    store = LocalObjectStore(d)
    known = _known_after_first_run(store)
    old = known["binlog.000002"]
    data = bytearray(read_fixture("binlog.000002"))
    data[len(data) // 2] ^= 0xFF  # other content (a row value), same size: only the etag tells
    (d / "binlog.000002").write_bytes(bytes(data))
    r = discover_source(store, "m", known=known)
    (warn,) = [i for i in r.issues if i.kind == "changed_object"]
    assert warn.severity == "warning" and warn.detail.endswith("ingested again")
    assert [f.file for f in r.to_ingest] == ["binlog.000002"] and not r.errors
    f2 = next(f for f in r.files if f.file == "binlog.000002")
    assert f2.etag != old.etag
    with pytest.raises(ReplacedObjectError) as info:
        discover_source(store, "m", known=known, on_replaced="fail")
    err = info.value
    assert err.replaced == [("binlog.000002", old.etag, old.size, f2.etag, f2.size)]
    assert str(err) == (f"source m: 1 ingested object(s) replaced with different content (policy "
                        f"on_replaced_object = 'fail'): binlog.000002: etag {old.etag} size {old.size} -> "
                        f"etag {f2.etag} size {f2.size}")
    assert [i.kind for i in err.discovery.errors] == ["changed_object"]
    assert err.discovery.to_ingest == []


def test_zero_byte_object_at_the_tip_is_not_closed_yet(tmp_path: Path) -> None:
    """An upload in progress may be listed with 0 bytes: the tip is left for the next run (no
    error, the chain is whole); an empty file with later files after it is still an error."""
    d = _chain_dir(tmp_path)
    (d / "binlog.000005").write_bytes(b"")
    r = discover_source(LocalObjectStore(d), "m")
    f5 = next(f for f in r.files if f.file == "binlog.000005")
    assert f5.state == "open" and "upload in progress" in f5.detail
    assert not r.errors and not r.chain_broken
    assert _kinds(r)["open_file"] == ["binlog.000005"] and "awaiting_successor" not in _kinds(r)
    assert [f.file for f in r.to_ingest] == list(MARIADB_FILES)
    (d / "binlog.000006").write_bytes(read_fixture("binlog.000001"))
    r2 = discover_source(LocalObjectStore(d), "m")
    assert _kinds(r2)["unclosed_file"] == ["binlog.000005"]
