"""binlake_testing.synthetic: generated archives decode as their ground truth says, faults included."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from binlake_testing.synthetic import Faults, SyntheticConfig, generate, main
from binlog_parser import GtidSet, read_events
from binlog_parser.errors import BinlogError, ChecksumMismatchError, TruncatedEventError

SMALL = dict(bytes_per_server=700 << 10, max_binlog_size=96 << 10, rows_per_table=60, tables=2)


def _scan(path: Path) -> dict:
    """Independent facts from our reader: previous GTIDs, complete transactions, rows, end."""
    out = {"gtids": [], "rows": {}, "closing": None, "error": None, "prev": None, "in_use": None,
           "txns": 0}
    pending = None
    try:
        for ev in read_events(path):
            n = ev.name
            if n == "FORMAT_DESCRIPTION":
                out["in_use"] = ev.in_use
            elif n == "PREVIOUS_GTIDS":
                out["prev"] = ev.gtid_set
            elif n in ("GTID", "GTID_TAGGED", "ANONYMOUS_GTID"):
                pending = (ev.gtid, {})
            elif n.endswith("ROWS_V2"):
                k = f"{ev.schema_name}.{ev.table_name}"
                d = pending[1].setdefault(k, {"insert": 0, "update": 0, "delete": 0})
                d[ev.kind] += len(ev.rows)
            elif n == "XID" or (n == "QUERY" and ev.query not in ("BEGIN",) and pending and not pending[1]):
                out["gtids"].append(pending[0])
                for k, d in pending[1].items():
                    acc = out["rows"].setdefault(k, {"insert": 0, "update": 0, "delete": 0})
                    for kind, c in d.items():
                        acc[kind] += c
                out["txns"] += 1
                pending = None
            elif n in ("ROTATE", "STOP"):
                out["closing"] = n
    except BinlogError as exc:
        out["error"] = exc
    return out


@pytest.fixture(scope="module")
def faulty(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    dest = tmp_path_factory.mktemp("synthetic")
    cfg = SyntheticConfig(servers=2, seed=11, uuids=2, tags=("audit",),
                          faults=Faults.parse("missing_file,gno_gap,duplicate_file,restart,truncated_tail"),
                          **SMALL)
    return dest, generate(str(dest), cfg)


def test_ground_truth_json_written_and_matches(faulty) -> None:
    dest, truth = faulty
    on_disk = json.loads((dest / "ground_truth.json").read_text())
    assert on_disk["sources"].keys() == truth["sources"].keys() == {"src1", "src2"}
    assert set(truth["sources"]["src1"]["faults"]) >= {"missing_file", "gno_gap", "duplicate_file",
                                                       "restart", "truncated_tail", "in_use_last"}
    assert truth["sources"]["src2"]["faults"] == []
    assert truth["sources"]["src1"]["server_version"] == "8.4.3"  # tags need the 8.4 format


def test_every_file_decodes_as_the_truth_says(faulty) -> None:
    dest, truth = faulty
    for src in truth["sources"].values():
        for f in src["files"]:
            p = dest / f["object"]
            if not f["present"]:
                assert not p.exists()
                continue
            s = _scan(p)
            assert str(s["prev"]) == f["previous_gtids"]
            assert GtidSet.from_gtids(g for g in s["gtids"] if g) == GtidSet.from_text(f["readable_gtids"])
            assert s["txns"] == f["readable_transactions"]
            assert s["closing"] == f["closing_event"]
            assert s["in_use"] == f["in_use"]
            for k, d in f["readable_rows_by_table"].items():
                assert s["rows"].get(k, {"insert": 0, "update": 0, "delete": 0}) == d, (f["name"], k)
            if f["truncated"]:
                assert isinstance(s["error"], TruncatedEventError)
            else:
                assert s["error"] is None, s["error"]


def test_expected_reconciliation_statuses(faulty) -> None:
    _dest, truth = faulty
    src = truth["sources"]["src1"]
    by_file = {r["file"]: r for r in src["reconciliation"]}
    files = src["files"]
    missing = [f for f in files if not f["present"]]
    assert len(missing) == 1
    idx = files.index(missing[0])
    after = by_file[files[idx + 1]["name"]]
    assert after["status"] == "GAP" and after["missing_files"] == [missing[0]["name"]]
    assert GtidSet.from_text(missing[0]["gtids"]) <= GtidSet.from_text(after["missing_gtids"])
    gap = [r for r in src["reconciliation"] if r["detail"] == "GNO gap inside the file"]
    assert len(gap) == 1 and GtidSet.from_text(gap[0]["missing_gtids"])
    dups = [r for r in src["reconciliation"] if r["status"] == "DUPLICATE"]
    assert len(dups) == 1 and dups[0]["duplicate_of"] == "binlog.000001"
    assert (_dest / "src1" / "binlog.000001.copy").read_bytes() == (_dest / "src1" / "binlog.000001").read_bytes()
    stops = [f for f in files if f["closing_event"] == "STOP"]
    assert len(stops) == 1
    nxt = files[files.index(stops[0]) + 1]
    assert nxt["server_restart_before"] and by_file[nxt["name"]]["status"] == "OK"
    assert all(r["status"] == "OK" for r in truth["sources"]["src2"]["reconciliation"])
    # archived = executed minus the lost file, the never-logged GNO and the cut transaction
    executed = GtidSet.from_text(src["gtid_executed"])
    archived = GtidSet.from_text(src["archived_gtids"])
    assert archived < executed
    assert GtidSet.from_text(missing[0]["gtids"]).isdisjoint(archived) if hasattr(GtidSet, "isdisjoint") \
        else not (GtidSet.from_text(missing[0]["gtids"]) & archived)


def test_reconciler_agrees_with_ground_truth(faulty) -> None:
    """binlake.reconcile.coverage over facts read back with our decoder gives the statuses
    the ground truth expects (the pipeline's scenarios)."""
    rec = pytest.importorskip("binlake.reconcile.coverage")
    dest, truth = faulty
    for name, src in truth["sources"].items():
        facts = []
        for f in src["files"]:
            if not f["present"]:
                continue
            s = _scan(dest / f["object"])
            gt = [g for g in s["gtids"] if g]
            facts.append(rec.FileFacts(
                source=name, file=f["name"], server_id=src["server_id"], size=f["size"],
                previous_gtids=str(s["prev"]), contained_gtids=str(GtidSet.from_gtids(gt)),
                first_gtid=gt[0] if gt else None, last_gtid=gt[-1] if gt else None,
                closing_event=s["closing"], next_file=f["next_file"] if s["closing"] == "ROTATE" else None,
                truncated=f["truncated"], transactions=s["txns"]))
        rows = {r.file: r for r in rec.reconcile_source(facts)}
        for exp in src["reconciliation"]:
            got = rows[exp["file"]]
            assert got.status == exp["status"], (exp, got.detail)
            if exp["status"] == "GAP":
                assert GtidSet.from_text(got.missing_gtids) == GtidSet.from_text(exp["missing_gtids"])
            if exp["duplicate_of"]:
                assert got.duplicate_of == exp["duplicate_of"]


def test_corrupted_tail_and_in_use(tmp_path: Path) -> None:
    truth = generate(str(tmp_path), SyntheticConfig(seed=5, faults=Faults.parse("corrupted_tail"), **SMALL))
    last = truth["sources"]["src1"]["files"][-1]
    assert last["corrupted"] and last["in_use"] and last["closing_event"] is None
    s = _scan(tmp_path / last["object"])
    assert isinstance(s["error"], ChecksumMismatchError)
    assert s["error"].offset == last["corrupt_offset"] - 22
    assert GtidSet.from_gtids(s["gtids"]) == GtidSet.from_text(last["readable_gtids"])


def test_deterministic_and_compressed_variant(tmp_path: Path) -> None:
    a = generate(str(tmp_path / "a"), SyntheticConfig(seed=3, **SMALL))
    b = generate(str(tmp_path / "b"), SyntheticConfig(seed=3, **SMALL))
    for fa, fb in zip(a["sources"]["src1"]["files"], b["sources"]["src1"]["files"]):
        assert (tmp_path / "a" / fa["object"]).read_bytes() == (tmp_path / "b" / fb["object"]).read_bytes()
    c = generate(str(tmp_path / "c"), SyntheticConfig(seed=3, compression=True, **SMALL))
    f = c["sources"]["src1"]["files"][1]
    names = {e.name for e in read_events(tmp_path / "c" / f["object"])}
    assert "TRANSACTION_PAYLOAD" in names
    s = _scan(tmp_path / "c" / f["object"])
    assert GtidSet.from_gtids(s["gtids"]) == GtidSet.from_text(f["readable_gtids"])


@pytest.mark.parametrize("workload", ["ddl", "blob"])
def test_other_workloads(tmp_path: Path, workload: str) -> None:
    truth = generate(str(tmp_path), SyntheticConfig(workload=workload, seed=2, bytes_per_server=600 << 10,
                                                   max_binlog_size=200 << 10, rows_per_table=20))
    src = truth["sources"]["src1"]
    for f in src["files"]:
        s = _scan(tmp_path / f["object"])
        assert s["error"] is None
        assert GtidSet.from_gtids(s["gtids"]) == GtidSet.from_text(f["readable_gtids"])
    if workload == "blob":
        assert src["rows_by_table"]["media.docs"]["insert"] > 3


def test_s3_destination(tmp_path: Path, s3_server, s3_bucket: str, s3_client) -> None:
    from binlake.config import S3Settings

    settings = S3Settings(endpoint_url=s3_server.endpoint_url, path_style_access=True, ssl_enabled=False)
    truth = generate(f"s3://{s3_bucket}/archive", SyntheticConfig(
        servers=1, seed=9, faults=Faults.parse("missing_file,truncated_tail,duplicate_file"), **SMALL),
        s3_settings=settings)
    keys = {o["Key"] for o in s3_client.list_objects_v2(Bucket=s3_bucket, Prefix="archive/")["Contents"]}
    present = {f"archive/{f['object']}" for f in truth["sources"]["src1"]["files"] if f["present"]}
    assert present | {"archive/ground_truth.json"} == keys
    last = [f for f in truth["sources"]["src1"]["files"] if not f["duplicate_of"]][-1]
    body = s3_client.get_object(Bucket=s3_bucket, Key=f"archive/{last['object']}")["Body"].read()
    assert len(body) == last["size"] and last["truncated"]


def test_cli(tmp_path: Path, capsys) -> None:
    assert main([str(tmp_path / "x"), "--size", "300KiB", "--max-binlog-size", "64KiB", "--faults",
                 "restart,in_use_last", "--servers", "2", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "src1:" in out and "src2:" in out
    truth = json.loads((tmp_path / "x" / "ground_truth.json").read_text())
    assert truth["sources"]["src1"]["files"][-1]["in_use"]
    with pytest.raises(ValueError):
        Faults.parse("nope")


def test_chain_break(tmp_path: Path) -> None:
    rec = pytest.importorskip("binlake.reconcile.coverage")
    cfg = SyntheticConfig(seed=8, faults=Faults.parse("chain_break,restart"), bytes_per_server=900 << 10,
                          max_binlog_size=96 << 10, rows_per_table=60, tables=2)
    truth = generate(str(tmp_path), cfg)
    src = truth["sources"]["src1"]
    assert set(src["faults"]) >= {"chain_break", "restart"}
    broken = src["chain_breaks"]
    assert len(broken) == 1
    by_file = {r["file"]: r["status"] for r in src["reconciliation"]}
    assert by_file[broken[0]] == "CHAIN_BREAK"
    assert sum(1 for st in by_file.values() if st != "OK") == 1
    first_after = next(f for f in src["files"] if f["name"] == broken[0])
    assert first_after["previous_gtids"] == "" and first_after["server_restart_before"]
    facts = []
    for f in src["files"]:
        s = _scan(tmp_path / f["object"])
        gt = [g for g in s["gtids"] if g]
        facts.append(rec.FileFacts(
            source="src1", file=f["name"], previous_gtids=str(s["prev"]),
            contained_gtids=str(GtidSet.from_gtids(gt)), closing_event=s["closing"],
            next_file=f["next_file"] if s["closing"] == "ROTATE" else None, transactions=s["txns"]))
    got = {r.file: r.status for r in rec.reconcile_source(facts)}
    assert got == by_file


def test_binlake_generate_subcommand(tmp_path: Path) -> None:
    from binlake_cli.app import main as binlake_main

    assert binlake_main(["generate", str(tmp_path / "g"), "--size", "150KiB", "--max-binlog-size", "64KiB",
                         "--quiet", "--no-orders"]) == 0
    assert (tmp_path / "g" / "ground_truth.json").exists()
