"""A warehouse written by the real Spark ingest + reconcile of the fixture chain, in scenarios.

Sources: ``clean`` (the MariaDB 10.11 chain), ``missing`` (binlog.000002 never archived: a GAP of
0:4-6), ``dup`` (binlog.000002 uploaded twice: a DUPLICATE) and ``mysql56`` (a MySQL 5.6 two-file
chain whose second file follows GTIDs no archived file holds). Shared by the `binlake sql` and
coverage-report tests (each builds it once per module); the reconcile test ingests the same
sources (``scenario_objects``) plus ``trunc``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from conftest import make_test_config

from binlake.config import BinlakeConfig

FIX = Path(__file__).resolve().parent / "fixtures"
MARIA = FIX / "mariadb-10.11"
IK = FIX / "binlogs" / "ikarishinjieva__mysql_binlog_utils"


def _put(folder: Path, name: str, data: bytes, source: str, objs: list[Any]) -> None:
    from spark_jobs.ingest import BinlogObject

    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(data)
    objs.append(BinlogObject(source=source, uri=str(folder / name), size=len(data),
                             etag=f"{source}/{name}/{len(data)}"))


def scenario_objects(archive: Path, *, truncated: bool = False) -> list[Any]:
    """Write the scenario sources' files under ``archive/<source>/``; their ``BinlogObject``s in
    ingest order. ``truncated`` adds the source ``trunc`` (the reconcile test's): the chain with
    binlog.000002 cut inside its last transaction (the active file archived mid-write)."""
    chain = {p.name: p.read_bytes() for p in sorted(MARIA.glob("binlog.0*"))}
    objs: list[Any] = []
    for name, data in chain.items():
        _put(archive / "clean", name, data, "clean", objs)
        if name != "binlog.000002":
            _put(archive / "missing", name, data, "missing", objs)
        _put(archive / "dup", name, data, "dup", objs)
        if truncated:
            _put(archive / "trunc", name, data[:-100] if name == "binlog.000002" else data, "trunc", objs)
    _put(archive / "dup", "binlog-reupload.000002", chain["binlog.000002"], "dup", objs)
    _put(archive / "mysql56", "mysql-bin.000001", (IK / "test__mysql-bin56.000001").read_bytes(), "mysql56", objs)
    _put(archive / "mysql56", "mysql-bin.000002", (IK / "test__mysql-bin56.000002").read_bytes(), "mysql56", objs)
    return objs


def build_scenario_warehouse(spark: Any, archive: Path, tmp: Path, endpoint: str) -> BinlakeConfig:
    """Ingest + reconcile the scenario sources; returns a config whose warehouse holds the result."""
    from binlake.reconcile.job import run_reconcile
    from spark_jobs.ingest import run_ingest

    objs = scenario_objects(archive)
    sources = [{"name": s, "uri": str(archive / s)} for s in ("clean", "missing", "dup", "mysql56")]
    cfg = make_test_config(tmp, endpoint, sources=sources)
    run_ingest(spark, cfg, objs, "ingest-1")
    run_reconcile(cfg, "reconcile-1")
    return cfg


def write_config_file(cfg: BinlakeConfig, path: Path, warehouse: str | None = None) -> Path:
    """The TOML a user would write for ``cfg`` (absolute paths), e.g. to run the CLI on it."""
    lines = ["[pipeline]", f'warehouse = "{warehouse or cfg.warehouse}"', f'state_dir = "{cfg.state_dir}"',
             f'jars_dir = "{cfg.jars_dir}"', ""]
    for src in cfg.sources:
        lines += ["[[sources]]", f'name = "{src.name}"', f'uri = "{src.uri}"', ""]
    lines += ["[s3]", f'endpoint_url = "{cfg.s3.endpoint_url}"', "path_style_access = true", "max_attempts = 3", "",
              "[spark]", 'master = "local[2]"', "shuffle_partitions = 2", "ui_enabled = false",
              'driver_memory = "1g"', ""]
    path.write_text("\n".join(lines))
    return path


_BUILT: dict[str, BinlakeConfig] = {}


def scenario_warehouse(spark: Any, tmp_path_factory: Any, endpoint: str) -> BinlakeConfig:
    """The scenario warehouse, built once per test process (Spark and the S3 server are session-wide)."""
    if "cfg" not in _BUILT:
        _BUILT["cfg"] = build_scenario_warehouse(spark, tmp_path_factory.mktemp("archive"),
                                                 tmp_path_factory.mktemp("wh"), endpoint)
    return _BUILT["cfg"]
