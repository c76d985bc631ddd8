"""binlake.runs: run parameters, the run folder hand-over and the run summary, without Spark or Airflow.

The archive is the real MariaDB 10.11 chain in a local folder; discovery writes the run's
``discovery`` and ``plan`` documents, the summary reads every step's document back.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from pathlib import Path

import pytest

from binlake.config import BinlakeConfig
from binlake.runs import (
    MissingPlanError,
    RunFailedError,
    RunParamsError,
    discover,
    get_discovery,
    get_doc,
    get_plan,
    get_result,
    normalize_params,
    put_doc,
    resolve_sources,
    run_key,
    summarize,
)
from binlake.step_results import (
    BinlogObject,
    ChecksResult,
    DecodeResult,
    GoldStepResult,
    ReconcileProblem,
    ReconcileResult,
    to_doc,
)
from tests._chain_util import MARIADB_FILES, read_fixture, write_mariadb_chain
from tests.conftest import make_test_config


@pytest.fixture()
def cfg(tmp_path: Path) -> BinlakeConfig:
    archive = write_mariadb_chain(tmp_path / "archive")
    return make_test_config(tmp_path, "http://127.0.0.1:9", sources=[
        {"name": "chain", "uri": str(archive)}, {"name": "other", "uri": str(tmp_path / "other")}])


def test_nightly_params_are_the_defaults_whatever_is_passed() -> None:
    assert normalize_params({"mode": "reprocess", "from_file": "binlog.000002"}, backfill=False) == {
        "mode": "nightly", "from_file": None, "to_file": None, "from_time": None, "to_time": None, "dry_run": False}


def test_backfill_params_from_an_empty_trigger_form() -> None:
    empty = {"source": None, "mode": "missing", "from_file": None, "to_file": "", "from_date": None,
             "to_date": "2026-01-02", "dry_run": False}
    p = normalize_params(empty, backfill=True)
    assert p["mode"] == "missing" and p["from_file"] is None and p["to_file"] is None
    assert p["to_time"] == 1767312000.0  # 2026-01-02T00:00:00Z


def test_bad_backfill_params_are_named() -> None:
    with pytest.raises(RunParamsError, match="'rebuild'"):
        normalize_params({"mode": "rebuild"}, backfill=True)
    with pytest.raises(RunParamsError, match="not a date"):
        normalize_params({"from_date": "02/01/2026"}, backfill=True)


def test_sources_all_or_a_validated_subset(cfg: BinlakeConfig) -> None:
    assert resolve_sources(None, cfg) == ["chain", "other"]
    assert resolve_sources(" other, chain ", cfg) == ["other", "chain"]
    with pytest.raises(RunParamsError, match=r"unknown source\(s\) \['nope'\]; configured: \['chain', 'other'\]"):
        resolve_sources("chain,nope", cfg)


def test_run_keys_are_path_safe() -> None:
    assert run_key("scheduled__2026-01-01T02:00:00+00:00") == "scheduled__2026-01-01T02_00_00_00_00"
    assert run_key("../..") == "run"


def test_discover_plans_the_chain_and_the_summary_names_what_did_not_run(cfg: BinlakeConfig) -> None:
    found = discover("chain", "scheduled__2026-01-01T02:00:00+00:00", cfg=cfg)
    assert found.files == MARIADB_FILES and found.to_ingest == 4  # the server closed all four
    assert not found.chain_broken and found.objects == 4
    assert to_doc(found)["files"] == list(MARIADB_FILES)  # the XCom: plain JSON
    plan = get_plan(cfg, "scheduled__2026-01-01T02:00:00+00:00", "chain")
    assert plan.run_id == "scheduled__2026-01-01T02:00:00+00:00" and plan.mode == "nightly" and not plan.force
    assert plan.file_names == list(MARIADB_FILES)
    assert plan.files[0] == BinlogObject(source="chain", file="binlog.000001", uri=plan.files[0].uri,
                                        size=len(read_fixture("binlog.000001")), etag=plan.files[0].etag)
    assert plan.reasons == {name: "new" for name in MARIADB_FILES}
    disc = get_discovery(cfg, "scheduled__2026-01-01T02:00:00+00:00", "chain")
    assert [f.closing_event for f in disc.files] == ["ROTATE", "ROTATE", "ROTATE", "STOP"]
    assert disc.files[3].next_file == "binlog.000005"  # the series successor after STOP
    with pytest.raises(RunFailedError, match="source chain: did not complete: decode, reconcile, gold, data_checks"):
        summarize(["chain"], "scheduled__2026-01-01T02:00:00+00:00", cfg, coverage_pages=False)
    for step, doc in (("decode", DecodeResult("chain", files=4, rows={"bronze.events": 40})),
                      ("reconcile", ReconcileResult("chain", files=4, statuses={"OK": 4})),
                      ("gold", GoldStepResult("chain", tables=2)), ("checks", ChecksResult("chain", checked_files=4))):
        put_doc(cfg, "scheduled__2026-01-01T02:00:00+00:00", "chain", step, doc)
    summary = summarize(["chain"], "scheduled__2026-01-01T02:00:00+00:00", cfg, coverage_pages=False)
    assert summary.ok and summary.sources["chain"].ingested == 4 and summary.sources["chain"].planned == 4
    assert summary.sources["chain"].reconciliation == {"OK": 4}
    assert summary.sources["chain"].rows == {"bronze.events": 40}


def test_step_documents_round_trip_as_their_classes(cfg: BinlakeConfig) -> None:
    problem = ReconcileProblem("chain", "binlog.000003", "GAP", missing_gtids="0-1-6:0-1-8",
                               missing_files=("binlog.000002",), detail="binlog.000002 is missing")
    result = ReconcileResult("chain", files=3, statuses={"OK": 2, "GAP": 1}, problems=(problem,), ok=False)
    put_doc(cfg, "r", "chain", "reconcile", result)
    doc = get_doc(cfg, "r", "chain", "reconcile")
    assert doc is not None and doc["problems"][0]["missing_files"] == ["binlog.000002"]
    assert get_result(cfg, "r", "chain", "reconcile", ReconcileResult) == result
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.ok = True  # type: ignore[misc]
    put_doc(cfg, "r", "chain", "decode", {"source": "chain", "files": "four"})
    with pytest.raises(ValueError, match="files"):
        get_result(cfg, "r", "chain", "decode", DecodeResult)
    with pytest.raises(MissingPlanError, match="no ingest plan for source chain in run r: did discover run"):
        get_plan(cfg, "r", "chain")


def test_a_dry_run_with_a_broken_chain_reports_it_and_does_not_fail(cfg: BinlakeConfig) -> None:
    discover("chain", "dry", {"mode": "missing", "dry_run": True}, backfill=True, cfg=cfg)
    gap = ReconcileProblem("chain", "binlog.000004", "GAP", missing_files=("binlog.000003",), detail="missing")
    for step, doc in (("decode", DecodeResult("chain", dry_run=True, spark=False)),
                      ("reconcile", ReconcileResult("chain", dry_run=True, problems=(gap,), spark=False)),
                      ("gold", GoldStepResult("chain", dry_run=True)), ("checks", ChecksResult("chain"))):
        put_doc(cfg, "dry", "chain", step, doc)
    summary = summarize(["chain"], "dry", cfg)
    assert summary.ok and summary.sources["chain"].dry_run
    assert summary.problems == ("source chain: dry run: the binlog chain is broken", "  binlog.000004: GAP missing")
    assert summary.sources["chain"].coverage_html is None  # a dry run draws nothing


def test_a_failed_source_fails_the_summary_with_its_gap(cfg: BinlakeConfig) -> None:
    discover("chain", "gap", cfg=cfg)
    gap = ReconcileProblem("chain", "binlog.000004", "GAP", missing_files=("binlog.000003",),
                           detail="GAP: binlog.000003 is missing")
    put_doc(cfg, "gap", "chain", "decode", DecodeResult("chain", files=4))
    put_doc(cfg, "gap", "chain", "reconcile", ReconcileResult("chain", problems=(gap,), ok=False))
    with pytest.raises(RunFailedError) as failed:
        summarize(["chain"], "gap", cfg, coverage_pages=False)
    assert str(failed.value) == ("run failed:\nsource chain: did not complete: gold, data_checks; failed: reconcile\n"
                                 "  binlog.000004: GAP GAP: binlog.000003 is missing")


def test_the_run_lease_is_released_by_the_summary(cfg: BinlakeConfig) -> None:
    discover("chain", "run-a", cfg=cfg)
    from binlake.lake.leases import LeaseHeldError

    with pytest.raises(LeaseHeldError, match="'run-a'"):
        discover("chain", "run-b", cfg=cfg)
    with pytest.raises(RunFailedError):
        summarize(["chain"], "run-a", cfg, coverage_pages=False)
    assert discover("chain", "run-b", cfg=cfg).source == "chain"


def test_each_run_draws_the_coverage_page_next_to_its_summary(cfg: BinlakeConfig,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Stored meta tables of a MySQL chain whose binlog.000002 (GNOs 6-8) was never archived; a page
    drawn from unchanged tables is copied from the last one."""
    import datetime as dt

    import pyarrow as pa
    from deltalake import write_deltalake

    from binlake.lake.delta_tables import delta_uri
    from binlake.lake.tables import table_location
    from binlake.reconcile.coverage import FileFacts, coverage, reconcile

    uuid = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
    facts = [FileFacts(source="chain", file=f"binlog.{seq:06d}", seq=seq, previous_gtids=prev, contained_gtids=has,
                       closing_event="ROTATE", next_file=f"binlog.{seq + 1:06d}", fingerprint=str(seq))
             for seq, prev, has in ((1, "", f"{uuid}:1-5"), (3, f"{uuid}:1-8", f"{uuid}:9-12"))]
    noon = dt.datetime(2026, 1, 1, 12, tzinfo=dt.UTC)
    tables = {
        "meta.binlog_files": [{"source": "chain", "file": f.file, "first_event_time": noon + dt.timedelta(hours=i),
                               "last_event_time": noon + dt.timedelta(hours=i, minutes=50)} for i, f in enumerate(facts)],
        "meta.gtid_coverage": [c.as_dict() for c in coverage(facts)],
        "meta.gtid_reconciliation": [r.as_dict() for r in reconcile(facts)],
    }
    for name, rows in tables.items():
        write_deltalake(delta_uri(table_location(cfg.warehouse, name)), pa.Table.from_pylist(rows), partition_by=["source"])
    discover("chain", "night", cfg=cfg)
    put_doc(cfg, "night", "chain", "decode", DecodeResult("chain", files=0, spark=False))
    put_doc(cfg, "night", "chain", "reconcile", ReconcileResult(
        "chain", problems=(ReconcileProblem("chain", "binlog.000003", "GAP", missing_files=("binlog.000002",)),),
        ok=False))
    with pytest.raises(RunFailedError, match="binlog.000003: GAP"):
        summarize(["chain"], "night", cfg)
    summary = json.loads((Path(cfg.warehouse) / "_binlake/runs/night/summary.json").read_text())
    page = Path(summary["sources"]["chain"]["coverage_html"])
    assert page.name == "coverage-chain.html" and page.parent.parent == (
        Path(cfg.warehouse) / "_binlake/runs/_sources/chain/coverage")  # kept by a digest of what it draws
    assert summary["sources"]["chain"]["coverage_png"] == str(page.with_suffix(".png"))
    html = page.read_text()
    assert "binlog.000002" in html and f"{uuid}:6-8" in html and "GAP" in html
    png = page.with_suffix(".png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # the next night changed none of the three tables: its summary names the same page, not drawn again
    import binlake.reconcile.report

    def no_drawing(*_args: object, **_kw: object) -> None:
        raise AssertionError("the page was drawn again")

    monkeypatch.setattr(binlake.reconcile.report, "render_coverage_report", no_drawing)
    pages = {}
    for night in ("night2", "night3"):
        if night == "night3":  # binlog.000004 arrived: the page must be drawn again (here: refused)
            write_deltalake(delta_uri(table_location(cfg.warehouse, "meta.binlog_files")), pa.Table.from_pylist(
                [{"source": "chain", "file": "binlog.000004", "first_event_time": noon + dt.timedelta(hours=3),
                  "last_event_time": noon + dt.timedelta(hours=3, minutes=50)}]), partition_by=["source"], mode="append")
        discover("chain", night, cfg=cfg)
        put_doc(cfg, night, "chain", "decode", DecodeResult("chain", files=0, spark=False))
        with pytest.raises(RunFailedError):
            summarize(["chain"], night, cfg)
        pages[night] = json.loads((Path(cfg.warehouse) / f"_binlake/runs/{night}/summary.json").read_text())
    assert pages["night2"]["sources"]["chain"]["coverage_html"] == str(page)
    assert pages["night3"]["sources"]["chain"]["coverage_html"] is None  # drawing it failed: logged, not fatal


def test_a_healthy_source_gets_its_coverage_page_without_a_picture(cfg: BinlakeConfig) -> None:
    """A chain whose reconciliation found nothing: the night's summary names the HTML page and no
    PNG (the picture is for a night with findings; its Chromium run cost most of the summary)."""
    import datetime as dt

    import pyarrow as pa
    from deltalake import write_deltalake

    from binlake.lake.delta_tables import delta_uri
    from binlake.lake.tables import table_location
    from binlake.reconcile.coverage import FileFacts, coverage, reconcile

    uuid = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
    facts = [FileFacts(source="chain", file=f"binlog.{seq:06d}", seq=seq, previous_gtids=prev, contained_gtids=has,
                       closing_event="ROTATE", next_file=f"binlog.{seq + 1:06d}", fingerprint=str(seq))
             for seq, prev, has in ((1, "", f"{uuid}:1-5"), (2, f"{uuid}:1-5", f"{uuid}:6-8"))]
    assert {r.status for r in reconcile(facts)} == {"OK"}
    noon = dt.datetime(2026, 1, 1, 12, tzinfo=dt.UTC)
    tables = {"meta.binlog_files": [{"source": "chain", "file": f.file, "first_event_time": noon,
                                     "last_event_time": noon + dt.timedelta(minutes=50)} for f in facts],
              "meta.gtid_coverage": [c.as_dict() for c in coverage(facts)],
              "meta.gtid_reconciliation": [r.as_dict() for r in reconcile(facts)]}
    for name, rows in tables.items():
        write_deltalake(delta_uri(table_location(cfg.warehouse, name)), pa.Table.from_pylist(rows), partition_by=["source"])
    discover("chain", "night", cfg=cfg)
    put_doc(cfg, "night", "chain", "decode", DecodeResult("chain", files=0, spark=False))
    put_doc(cfg, "night", "chain", "reconcile", ReconcileResult("chain", ok=True))
    with contextlib.suppress(RunFailedError):  # the steps after reconcile never ran: the verdict is not the point
        summarize(["chain"], "night", cfg)
    summary = json.loads((Path(cfg.warehouse) / "_binlake/runs/night/summary.json").read_text())["sources"]["chain"]
    page = Path(summary["coverage_html"])
    assert page.name == "coverage-chain.html" and f"{uuid}:1-8" in page.read_text()
    assert summary["coverage_png"] is None and not page.with_suffix(".png").exists()
