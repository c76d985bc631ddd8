"""The catalog's pure side: names -> locations and DDL, the metastore settings and their overrides,
the printed spark-conf forms, and ``binlake serve``'s refusal of an open non-loopback bind."""

from __future__ import annotations

import dataclasses
import shlex
from pathlib import Path

import pytest

from binlake.config import BinlakeConfig, load_config
from binlake.lake.catalog import (
    catalog_entries,
    conf_lines,
    defaults_block,
    gold_specs,
    metastore_conf,
    uses_derby,
)
from binlake.lake.tables import TABLES
from binlake.sql.describe import describe_rows, describe_target, spark_type_name
from binlake_cli.serve import ServeOptions, UnsafeBindError, check_bind, is_loopback, server_conf


def _cfg(tmp_path: Path, extra: dict[str, str] | None = None) -> BinlakeConfig:
    cfg = load_config(None)
    return dataclasses.replace(cfg, warehouse="s3://lake/wh", state_dir=str(tmp_path / "state"),
                               spark=dataclasses.replace(cfg.spark, extra_conf=extra or {}))


def test_entries_cover_the_registry_and_the_gold_names() -> None:
    entries = catalog_entries("s3://lake/wh/", ["a__db__t", "a__db__t__history", "a__db__t", "Bad-Name", "u"])
    assert [e.full_name for e in entries] == [*(t.full_name for t in TABLES),
                                              "gold.a__db__t", "gold.a__db__t__history", "gold.u"]
    orders = entries[-3]
    assert orders.location == "s3a://lake/wh/gold/a__db__t"
    assert orders.create_sql() == "CREATE TABLE IF NOT EXISTS gold.a__db__t USING delta LOCATION 's3a://lake/wh/gold/a__db__t'"
    assert [s.name for s in gold_specs(["x'y", "ok"])] == ["ok"]


def test_a_location_with_a_quote_stays_one_literal() -> None:
    (entry,) = [e for e in catalog_entries("/data/it's", []) if e.full_name == "silver.transactions"]
    assert entry.create_sql().endswith("LOCATION '/data/it\\'s/silver/transactions'")


def test_metastore_defaults_to_derby_under_the_state_dir(tmp_path: Path) -> None:
    conf = metastore_conf(_cfg(tmp_path))
    state = (tmp_path / "state").resolve()
    assert conf == {
        "spark.sql.catalogImplementation": "hive",
        "spark.sql.warehouse.dir": str(state / "spark-warehouse"),
        "spark.hadoop.javax.jdo.option.ConnectionURL":
            f"jdbc:derby:;databaseName={state / 'metastore' / 'metastore_db'};create=true",
        "spark.driver.extraJavaOptions": f"-Dderby.stream.error.file={state / 'logs' / 'derby.log'}"}
    assert uses_derby(conf)


def test_spark_conf_names_another_metastore_and_keeps_driver_options(tmp_path: Path) -> None:
    url = "jdbc:postgresql://postgres:5432/metastore"
    conf = metastore_conf(_cfg(tmp_path, {"spark.hadoop.javax.jdo.option.ConnectionURL": url,
                                          "spark.hadoop.javax.jdo.option.ConnectionDriverName": "org.postgresql.Driver",
                                          "spark.driver.extraJavaOptions": "-Xss4m", "spark.other": "x"}))
    assert conf["spark.hadoop.javax.jdo.option.ConnectionURL"] == url
    assert conf["spark.hadoop.javax.jdo.option.ConnectionDriverName"] == "org.postgresql.Driver"
    assert conf["spark.driver.extraJavaOptions"].startswith("-Xss4m -Dderby.stream.error.file=")
    assert "spark.other" not in conf and not uses_derby(conf)


def test_printed_forms_round_trip() -> None:
    conf = {"spark.a": "x y", "spark.longer.key": "v=1"}
    assert conf_lines(conf) == ["--conf 'spark.a=x y'", "--conf spark.longer.key=v=1"]
    assert [shlex.split(line)[1] for line in conf_lines(conf)] == ["spark.a=x y", "spark.longer.key=v=1"]
    assert defaults_block(conf) == "spark.a           x y\nspark.longer.key  v=1\n"


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1", "127.0.0.2"])
def test_loopback_needs_no_authentication(tmp_path: Path, host: str) -> None:
    assert is_loopback(host)
    check_bind(_cfg(tmp_path), ServeOptions(host=host, connect=True))


def test_an_open_bind_elsewhere_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UnsafeBindError, match="needs authentication for the Thrift server: set "
                                              "spark.hadoop.hive.server2.authentication"):
        check_bind(_cfg(tmp_path), ServeOptions(host="0.0.0.0"))
    with pytest.raises(UnsafeBindError, match="NONE|needs authentication"):
        check_bind(_cfg(tmp_path, {"spark.hadoop.hive.server2.authentication": "NONE"}), ServeOptions(host="10.0.0.5"))
    ldap = _cfg(tmp_path, {"spark.hadoop.hive.server2.authentication": "LDAP"})
    check_bind(ldap, ServeOptions(host="0.0.0.0"))
    with pytest.raises(UnsafeBindError, match="spark.connect.authenticate.token"):
        check_bind(ldap, ServeOptions(host="0.0.0.0", connect=True))
    check_bind(_cfg(tmp_path, {"spark.connect.authenticate.token": "t"}),
               ServeOptions(host="0.0.0.0", thrift=False, connect=True))


def test_server_conf() -> None:
    conf = server_conf(ServeOptions(host="127.0.0.1", port=10001, connect=True, connect_port=15003))
    assert conf["spark.hadoop.hive.server2.thrift.port"] == "10001"
    assert conf["spark.plugins"] == "org.apache.spark.sql.connect.SparkConnectPlugin"
    assert conf["spark.connect.grpc.binding.port"] == "15003"
    assert "spark.plugins" not in server_conf(ServeOptions())


def test_describe_statements_and_type_names() -> None:
    assert describe_target("DESCRIBE silver.row_changes") == "silver.row_changes"
    assert describe_target("desc table `Gold`.`x__y`;") == "gold.x__y"
    assert [describe_target(s) for s in ("DESCRIBE EXTENDED silver.t", "DESCRIBE DETAIL silver.t",
                                         "DESCRIBE HISTORY meta.t", "DESCRIBE silver.t col", "DESCRIBE t")] == [None] * 5
    assert spark_type_name({"type": "map", "keyType": "string", "valueType": {
        "type": "array", "elementType": "long", "containsNull": True}, "valueContainsNull": True}) \
        == "map<string,array<bigint>>"
    schema = ('{"type":"struct","fields":[{"name":"source","type":"string","nullable":false,'
              '"metadata":{"comment":"where"}},{"name":"n","type":"short","nullable":true,"metadata":{}}]}')
    assert describe_rows(schema, ["source"]) == [
        ("source", "string", "where"), ("n", "smallint", None), ("# Partition Information", "", ""),
        ("# col_name", "data_type", "comment"), ("source", "string", "where")]
