"""spark_jobs.steps without a JVM: dry runs, routine nights with nothing new (a GAP found before is
still reported, read from meta.gtid_reconciliation with delta-rs), data checks refused after a
failed reconcile. Spark is forbidden in every test here: building a session fails the test.

The stored verdicts are what :func:`binlake.reconcile.coverage.reconcile` computes for a chain whose
second file was never archived, written as Delta tables by delta-rs.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from binlake.config import BinlakeConfig
from binlake.lake.delta_tables import delta_uri
from binlake.lake.tables import table_location
from binlake.reconcile.coverage import FileFacts, reconcile
from binlake.runs import ChainBrokenError, DataCheckError, discover, get_result, put_doc, release_source
from binlake.step_results import DecodeResult, ReconcileResult
from spark_jobs import steps
from tests._chain_util import MARIADB_FILES, make_open, read_fixture, write_mariadb_chain
from tests.conftest import make_test_config

A = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
RECON = "meta.gtid_reconciliation"


@pytest.fixture()
def cfg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> BinlakeConfig:
    import spark_jobs.session

    def no_spark(*_args: object, **_kw: object) -> None:
        raise AssertionError("a Spark session was started")

    monkeypatch.setattr(spark_jobs.session, "build_spark_session", no_spark)
    archive = write_mariadb_chain(tmp_path / "archive")
    (tmp_path / "quiet").mkdir()
    return make_test_config(tmp_path, "http://127.0.0.1:9", sources=[
        {"name": "chain", "uri": str(archive)}, {"name": "quiet", "uri": str(tmp_path / "quiet")}])


def _facts(source: str) -> list[FileFacts]:
    """binlog.000001, 000003, 000004 of a MySQL chain: binlog.000002 (GNOs 6-8) never archived."""
    def f(name: str, prev: str, contained: str, seq: int) -> FileFacts:
        return FileFacts(source=source, file=name, seq=seq, previous_gtids=prev, contained_gtids=contained,
                         closing_event="ROTATE", next_file=f"binlog.{seq + 1:06d}", fingerprint=name)

    return [f("binlog.000001", "", f"{A}:1-5", 1), f("binlog.000003", f"{A}:1-8", f"{A}:9-12", 3),
            f("binlog.000004", f"{A}:1-12", f"{A}:13-14", 4)]


def _store_verdict(cfg: BinlakeConfig, source: str, *, reconciled_files: int = 3) -> None:
    """meta.binlog_files and meta.gtid_reconciliation as an earlier run left them."""
    facts = _facts(source)
    rows = [r.as_dict() for r in reconcile(facts)][:reconciled_files]
    from spark_jobs.schemas import spec

    for name, table in (("meta.binlog_files", pa.Table.from_pylist([{k: v for k, v in asdict(x).items() if v is not None}
                                                                     for x in facts])),
                        ("meta.gtid_reconciliation", pa.Table.from_pylist(rows, schema=spec(RECON).arrow_schema))):
        write_deltalake(delta_uri(table_location(cfg.warehouse, name)), table, partition_by=["source"], mode="append")


def test_nothing_new_decodes_without_spark(cfg: BinlakeConfig) -> None:
    discover("quiet", "night", cfg=cfg)
    result = steps.run_spark_step("decode", "quiet", "night", cfg)
    assert result == DecodeResult(source="quiet", mode="nightly", files=0, skipped=0, spark=False)
    assert get_result(cfg, "night", "quiet", "decode", DecodeResult) == result


def test_a_gap_found_before_is_reported_again_without_spark(cfg: BinlakeConfig) -> None:
    _store_verdict(cfg, "quiet")
    discover("quiet", "night2", cfg=cfg)
    steps.run_spark_step("decode", "quiet", "night2", cfg)
    with pytest.raises(ChainBrokenError) as broken:
        steps.run_spark_step("reconcile", "quiet", "night2", cfg)
    assert str(broken.value) == (
        "source quiet: binlog chain broken\n"
        f"  gtid_reconciliation: binlog.000003: GAP (missing files binlog.000002; missing GTIDs {A}:6-8): "
        + get_result(cfg, "night2", "quiet", "reconcile", ReconcileResult).problems[0].detail)  # type: ignore[union-attr]
    stored = get_result(cfg, "night2", "quiet", "reconcile", ReconcileResult)
    assert stored is not None and stored.persisted and not stored.spark and not stored.ok
    assert stored.statuses == {"OK": 2, "GAP": 1} and stored.files == 3
    with pytest.raises(DataCheckError, match="source quiet: not checked: its reconcile step failed in run night2"):
        steps.run_data_checks("quiet", "night2", cfg)


def test_a_stale_verdict_is_recomputed_without_spark(cfg: BinlakeConfig) -> None:
    _store_verdict(cfg, "quiet", reconciled_files=2)  # binlog.000004 ingested, never reconciled
    discover("quiet", "night3", cfg=cfg)
    steps.run_spark_step("decode", "quiet", "night3", cfg)
    assert steps.persisted_reconciliation(cfg, "quiet") is None
    assert steps.reconcile_without_spark(cfg, "quiet", "night3") is None
    with pytest.raises(ChainBrokenError, match="binlog.000003: GAP"):
        steps.run_spark_step("reconcile", "quiet", "night3", cfg)  # recomputed by delta-rs: no session
    stored = get_result(cfg, "night3", "quiet", "reconcile", ReconcileResult)
    assert stored is not None and not stored.persisted and not stored.spark and not stored.ok
    assert stored.statuses == {"OK": 2, "GAP": 1} and steps.persisted_reconciliation(cfg, "quiet") is not None


def test_a_dry_run_starts_no_spark_and_raises_nothing(cfg: BinlakeConfig) -> None:
    _store_verdict(cfg, "chain")
    discover("chain", "dry", {"mode": "reprocess", "dry_run": True}, backfill=True, cfg=cfg)
    decoded = steps.run_spark_step("decode", "chain", "dry", cfg)
    assert isinstance(decoded, DecodeResult) and decoded.would_ingest == MARIADB_FILES and decoded.files == 0
    reconciled = steps.run_spark_step("reconcile", "chain", "dry", cfg)
    assert isinstance(reconciled, ReconcileResult) and reconciled.dry_run and reconciled.ok
    assert [(p.file, p.status, p.missing_files) for p in reconciled.problems] == [
        ("binlog.000003", "GAP", ("binlog.000002",))]
    assert steps.run_spark_step("gold", "chain", "dry", cfg).dry_run
    checks = steps.run_data_checks("chain", "dry", cfg)
    assert checks.ok and checks.note == "dry run" and checks.checked_files == 0


def _gold_ran_before(cfg: BinlakeConfig, source: str) -> None:
    """What the source's last successful gold step leaves: gold's inputs as they are now."""
    import json

    from binlake.runs import runs_store

    runs_store(cfg).put(steps._gold_inputs_key(source), json.dumps(steps.gold_inputs(cfg, source)).encode())


def test_the_discover_task_settles_quiet_sources_and_names_the_rest(cfg: BinlakeConfig) -> None:
    """One task discovers every source: ``quiet`` (nothing new, gold's inputs unchanged) is finished
    there, documents and lease release included; ``chain``, whose lease another run holds, is named
    with the reason, and its first step fails with it; once the lease is free it has files to ingest."""
    from binlake.runs import DiscoveryFailedError, get_doc, source_leases

    _gold_ran_before(cfg, "quiet")
    source_leases(cfg).take("chain", "other-run")
    night = steps.discover_run(cfg, ["chain", "quiet"], "night")
    assert (night.sources, night.busy, night.settled) == (("chain", "quiet"), ("chain",), ("quiet",))
    assert [f.source for f in night.found] == ["quiet"] and list(night.failed) == ["chain"]
    assert night.failed["chain"].startswith("source chain is being processed by run 'other-run'")
    with pytest.raises(DiscoveryFailedError, match=r"^source chain: not discovered in run night: source chain is "
                                                   "being processed by run 'other-run'"):
        steps.run_spark_step("decode", "chain", "night", cfg)
    assert [(get_doc(cfg, "night", "quiet", step) or {}).get(key) for step, key in (
        ("decode", "spark"), ("reconcile", "ok"), ("gold", "spark"), ("checks", "note"))] == [
        False, True, False, "nothing ingested"]
    source_leases(cfg).take("quiet", "next-run")  # released by the discover task: no LeaseHeldError
    release_source(cfg, "chain", "other-run")
    night2 = steps.discover_run(cfg, ["chain"], "night2")
    assert night2.busy == ("chain",) and night2.failed == {} and night2.found[0].to_ingest == len(MARIADB_FILES)
    assert night2.reasons == {"chain": "decode has work"}


def test_a_quiet_source_with_a_stored_gap_keeps_its_tasks(cfg: BinlakeConfig) -> None:
    """Nothing new, gold unchanged, but a GAP stored: not settled, so its reconcile task fails and
    alerts again; its lease stays with the run for those tasks."""
    from binlake.lake.leases import LeaseHeldError
    from binlake.runs import source_leases

    _store_verdict(cfg, "quiet")
    _gold_ran_before(cfg, "quiet")
    night = steps.discover_run(cfg, ["quiet"], "night")
    assert night.busy == ("quiet",) and night.settled == ()
    assert night.reasons == {"quiet": "ChainBrokenError: source quiet: binlog chain broken"}
    with pytest.raises(LeaseHeldError):
        source_leases(cfg).take("quiet", "next-run")
    with pytest.raises(ChainBrokenError, match="binlog.000003: GAP"):
        steps.run_spark_step("reconcile", "quiet", "night", cfg)


def test_a_batch_runs_each_source_and_names_every_failure(tmp_path: Path, cfg: BinlakeConfig) -> None:
    """``[pipeline] sources_per_task`` > 1: one task runs a step for several sources. ``quiet`` and
    ``loud`` have a GAP stored, ``calm`` nothing at all: every source is decoded; reconcile fails for
    the two with a GAP (one error naming both), ``calm`` is reconciled all the same; gold leaves the
    failed ones out, and a source whose decode never ran is left out of its reconcile."""
    from binlake.runs import SourcesFailedError, run_for_sources

    for name in ("loud", "calm"):
        (tmp_path / name).mkdir()
    batch = make_test_config(tmp_path, "http://127.0.0.1:9", sources=[
        {"name": n, "uri": str(tmp_path / n)} for n in ("quiet", "loud", "calm")])
    _store_verdict(batch, "quiet")
    _store_verdict(batch, "loud")
    _gold_ran_before(batch, "calm")
    names = ["quiet", "loud", "calm"]
    for name in names:
        discover(name, "night", cfg=batch)

    def run(step: str, sources: list[str]) -> Any:
        return run_for_sources(step, sources, "night", batch, lambda s: steps.run_spark_step(step, s, "night", batch))

    decoded = run("decode", names)
    assert [(s, r.files, r.spark) for s, r in decoded.results.items()] == [
        ("quiet", 0, False), ("loud", 0, False), ("calm", 0, False)]
    assert decoded.failures == {} and decoded.left_out == {}
    decoded.raise_failures()  # nothing failed: nothing raised
    reconciled = run("reconcile", names)
    assert list(reconciled.results) == ["calm"] and reconciled.results["calm"].ok
    assert {s: type(e).__name__ for s, e in reconciled.failures.items()} == {
        "quiet": "ChainBrokenError", "loud": "ChainBrokenError"}
    with pytest.raises(SourcesFailedError) as both:
        reconciled.raise_failures()
    assert str(both.value) == ("reconcile failed for 2 sources:\n"
                               "  quiet: source quiet: binlog chain broken\n  loud: source loud: binlog chain broken")
    one = run("reconcile", ["calm", "quiet"])
    with pytest.raises(ChainBrokenError, match="^source quiet: binlog chain broken"):
        one.raise_failures()  # one failure: raised as itself
    gold = run("gold", names)
    assert gold.left_out == {"quiet": "its reconcile step failed", "loud": "its reconcile step failed"}
    assert list(gold.results) == ["calm"] and gold.failures == {}
    checks = run_for_sources("data_checks", names, "night", batch, lambda s: steps.run_data_checks(s, "night", batch))
    assert checks.left_out == {"quiet": "its gold step did not run", "loud": "its gold step did not run"}
    assert [(s, r.note) for s, r in checks.results.items()] == [("calm", "nothing ingested")]
    discover("calm", "night2", cfg=batch)  # calm's lease was released by its data checks
    unready = run_for_sources("reconcile", ["calm"], "night2", batch, lambda s: steps.run_reconcile_step(s, "night2", batch))
    assert (unready.left_out, unready.results) == ({"calm": "its decode step did not run"}, {})


def test_stop_successors_come_from_discovery(cfg: BinlakeConfig) -> None:
    discover("chain", "n", cfg=cfg)
    assert steps.stop_successors(cfg, "chain", "n") == {}  # binlog.000005 is not archived (yet)
    release_source(cfg, "chain", "n")
    (Path(cfg.source("chain").uri) / "binlog.000005").write_bytes(read_fixture("binlog.000001"))
    discover("chain", "n2", cfg=cfg)
    assert steps.stop_successors(cfg, "chain", "n2") == {"binlog.000004": "binlog.000005"}


def test_data_checks_need_the_reconcile_document(cfg: BinlakeConfig) -> None:
    discover("quiet", "half", cfg=cfg)
    put_doc(cfg, "half", "quiet", "decode", DecodeResult("quiet"))
    with pytest.raises(DataCheckError, match="source quiet: not checked: its reconcile step did not run in run half"):
        steps.run_data_checks("quiet", "half", cfg)


@pytest.mark.spark
def test_decode_records_airflow_run_id_and_the_successor_of_a_stop(cfg: BinlakeConfig, spark: Any) -> None:
    """The fixture chain ends with a STOP in binlog.000004; binlog.000005 (still being written)
    is its successor in the archive."""
    from deltalake import DeltaTable

    run_id = "scheduled__2026-01-01T02:00:00+00:00"
    (Path(cfg.source("chain").uri) / "binlog.000005").write_bytes(make_open(read_fixture("binlog.000001")))
    found = discover("chain", run_id, cfg=cfg)
    assert found.files == MARIADB_FILES  # binlog.000005 is open: not ingested
    result = steps.step_decode(spark, cfg, "chain", run_id)
    assert result.files == 4 and result.next_file_filled == ("binlog.000004",) and result.ok

    def rows(name: str) -> dict[str, dict[str, Any]]:
        table = DeltaTable(delta_uri(table_location(cfg.warehouse, name))).to_pyarrow_table()
        return {r["file"]: r for r in table.to_pylist()}

    files = rows("meta.binlog_files")
    assert {f: (r["closing_event"], r["next_file"]) for f, r in files.items()} == {
        "binlog.000001": ("ROTATE", "binlog.000002"), "binlog.000002": ("ROTATE", "binlog.000003"),
        "binlog.000003": ("ROTATE", "binlog.000004"), "binlog.000004": ("STOP", "binlog.000005")}
    assert {r["run_id"] for r in rows("meta.ingested_files").values()} == {run_id}


def test_gold_is_skipped_only_while_its_inputs_are_unchanged(cfg: BinlakeConfig) -> None:
    import json

    from binlake.runs import runs_store
    from binlake.step_results import GoldStepResult

    _store_verdict(cfg, "quiet")
    discover("quiet", "g1", cfg=cfg)
    steps.run_spark_step("decode", "quiet", "g1", cfg)
    assert steps.gold_without_spark(cfg, "quiet", "g1") is None  # no successful gold step yet
    inputs = steps.gold_inputs(cfg, "quiet")
    assert inputs["meta.gtid_reconciliation"] is not None and inputs["silver.statements"] is None
    runs_store(cfg).put("_sources/quiet/gold_inputs.json", json.dumps(inputs).encode())  # as step_gold does
    assert steps.run_spark_step("gold", "quiet", "g1", cfg) == GoldStepResult(source="quiet", spark=False)
    _store_verdict(cfg, "other")  # another source's rows: not an input of quiet's gold
    assert steps.gold_inputs(cfg, "quiet") == inputs
    fewer_sources = make_test_config(Path(cfg.warehouse).parent, "http://127.0.0.1:9", sources=[
        {"name": "quiet", "uri": cfg.source("quiet").uri}])  # another night's config, same source
    assert steps.gold_inputs(fewer_sources, "quiet") == inputs
    with_history = make_test_config(Path(cfg.warehouse).parent, "http://127.0.0.1:9", gold={"history": True},
                                    sources=[{"name": "quiet", "uri": cfg.source("quiet").uri}])
    assert steps.gold_inputs(with_history, "quiet") != inputs  # [gold] shapes the gold tables
    _store_verdict(cfg, "quiet")  # quiet's rows written again
    assert steps.gold_without_spark(cfg, "quiet", "g1") is None
