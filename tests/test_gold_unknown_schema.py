"""A gold table whose schema cannot be known reaches the run summary (binlake.runs), not only its
``meta.gold_status`` row: the gold document lists it and the summary reports it as a problem of the
source without failing the run (the source's other tables are right). No Spark: the step documents
are written as the steps write them."""

from __future__ import annotations

from pathlib import Path

from binlake.runs import discover, get_result, put_doc, summarize
from binlake.step_results import ChecksResult, DecodeResult, GoldStepResult, ReconcileResult
from tests._chain_util import write_mariadb_chain
from tests.conftest import make_test_config

UNKNOWN = ("gold.chain__side__legacy: schema of side.legacy unknown: no CREATE TABLE for it in the archive "
           "and no seed; its columns are the TABLE_MAPs' @1..@N and no primary key is known "
           "(binlog_row_metadata is not FULL)")


def test_the_summary_reports_an_unknown_schema(tmp_path: Path) -> None:
    archive = write_mariadb_chain(tmp_path / "archive")
    cfg = make_test_config(tmp_path, "http://127.0.0.1:9", sources=[{"name": "chain", "uri": str(archive)}])
    discover("chain", "night", cfg=cfg)
    put_doc(cfg, "night", "chain", "decode", DecodeResult("chain", files=4))
    put_doc(cfg, "night", "chain", "reconcile", ReconcileResult("chain"))
    put_doc(cfg, "night", "chain", "gold", GoldStepResult("chain", tables=2, unknown_schemas=(UNKNOWN,)))
    put_doc(cfg, "night", "chain", "checks", ChecksResult("chain"))
    gold = get_result(cfg, "night", "chain", "gold", GoldStepResult)
    assert gold is not None and gold.unknown_schemas == (UNKNOWN,)
    summary = summarize(["chain"], "night", cfg, coverage_pages=False)
    assert summary.ok
    assert summary.problems == (f"source chain: {UNKNOWN} (seed it from a dump: [gold] seed_dumps)",)
