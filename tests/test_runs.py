"""binlake.runs: run parameters, the run folder hand-over and the run summary, without Spark or Airflow.

The archive is the real MariaDB 10.11 chain in a local folder; discovery writes the run's
``discovery`` and ``plan`` documents, the summary reads every step's document back.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from binlake.config import BinlakeConfig
from binlake.runs import (
    RunFailedError,
    RunParamsError,
    discover,
    get_doc,
    normalize_params,
    put_doc,
    resolve_sources,
    run_key,
    summarize,
)
from tests._chain_util import MARIADB_FILES, read_fixture
from tests.conftest import make_test_config


@pytest.fixture()
def cfg(tmp_path: Path) -> BinlakeConfig:
    archive = tmp_path / "archive"
    archive.mkdir()
    for name in MARIADB_FILES:
        (archive / name).write_bytes(read_fixture(name))
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
    found = discover("chain", "run-1", cfg=cfg)
    assert found["files"] == list(MARIADB_FILES) and found["to_ingest"] == 4  # the server closed all four
    assert not found["chain_broken"]
    plan = get_doc(cfg, "run-1", "chain", "plan")
    assert plan is not None and [f["file"] for f in plan["files"]] == list(MARIADB_FILES)
    with pytest.raises(RunFailedError, match="source chain: did not complete: decode, reconcile, gold, data_checks"):
        summarize(["chain"], "run-1", cfg)
    for step, doc in (("decode", {"files": 4, "rows": {}, "ok": True}), ("reconcile", {"statuses": {"OK": 4}, "ok": True}),
                      ("gold", {"tables": 2, "ok": True}), ("checks", {"ok": True})):
        put_doc(cfg, "run-1", "chain", step, doc)
    summary = summarize(["chain"], "run-1", cfg)
    assert summary["ok"] and summary["sources"]["chain"]["ingested"] == 4
    assert summary["sources"]["chain"]["reconciliation"] == {"OK": 4}


def test_the_run_lease_is_released_by_the_summary(cfg: BinlakeConfig) -> None:
    discover("chain", "run-a", cfg=cfg)
    from binlake.leases import LeaseHeldError

    with pytest.raises(LeaseHeldError, match="'run-a'"):
        discover("chain", "run-b", cfg=cfg)
    with pytest.raises(RunFailedError):
        summarize(["chain"], "run-a", cfg)
    assert discover("chain", "run-b", cfg=cfg)["source"] == "chain"
