"""Spark starts with the Maven-fetched Delta/S3A jars and round-trips Delta tables.

One test per storage kind (local folder, s3a:// on the loopback moto server): write, read,
MERGE (upsert + delete), read again. Kept small: 2 cores.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from binlake.config import BinlakeConfig
from spark_jobs.errors import MissingJarsError
from spark_jobs.session import DELTA_EXTENSION, jar_paths, spark_conf, spark_submit_kwargs


def _delta_round_trip(spark: Any, location: str) -> None:
    from delta.tables import DeltaTable

    rows = [(i, f"v{i}") for i in range(10)]
    spark.createDataFrame(rows, "k INT, v STRING").write.format("delta").mode("overwrite").save(location)
    assert spark.read.format("delta").load(location).count() == 10

    updates = spark.createDataFrame([(5, "new5"), (10, "v10"), (11, "v11"), (0, None)], "k INT, v STRING")
    (
        DeltaTable.forPath(spark, location).alias("t")
        .merge(updates.alias("s"), "t.k = s.k")
        .whenMatchedDelete(condition="s.v IS NULL")
        .whenMatchedUpdateAll()
        .whenNotMatchedInsertAll()
        .execute()
    )
    result = {r.k: r.v for r in spark.read.format("delta").load(location).collect()}
    assert len(result) == 11
    assert 0 not in result
    assert result[5] == "new5" and result[11] == "v11" and result[9] == "v9"

    history = DeltaTable.forPath(spark, location).history().select("operation").collect()
    assert [h.operation for h in history][:1] == ["MERGE"]
    # SQL over the path works too (the catalog is Delta's).
    n = spark.sql(f"SELECT count(*) AS n FROM delta.`{location}`").collect()[0].n
    assert n == 11


@pytest.mark.spark
def test_delta_round_trip_local_folder(spark: Any, tmp_path: Path) -> None:
    _delta_round_trip(spark, str(tmp_path / "delta_local"))
    assert (tmp_path / "delta_local" / "_delta_log").is_dir()


@pytest.mark.spark
def test_delta_round_trip_s3a(spark: Any, s3_bucket: str, s3_client: Any) -> None:
    _delta_round_trip(spark, f"s3a://{s3_bucket}/lake/t1")
    keys = [o["Key"] for o in s3_client.list_objects_v2(Bucket=s3_bucket)["Contents"]]
    assert any(k.startswith("lake/t1/_delta_log/") for k in keys)
    assert any(k.endswith(".parquet") for k in keys)


@pytest.mark.spark
def test_s3_scheme_maps_to_s3a(spark: Any, s3_bucket: str) -> None:
    spark.range(3).write.format("delta").save(f"s3://{s3_bucket}/plain")
    assert spark.read.format("delta").load(f"s3a://{s3_bucket}/plain").count() == 3


def test_spark_conf_uses_local_jars_and_no_ivy(binlake_config: BinlakeConfig) -> None:
    conf = spark_conf(binlake_config)
    # local[*]: the Maven-fetched jars go on the driver classpath in place (no per-session copy)
    jars = conf["spark.driver.extraClassPath"].split(os.pathsep)
    assert all(Path(j).is_file() for j in jars)
    assert any(Path(j).name.startswith("delta-spark_") for j in jars)
    assert any(Path(j).name.startswith("hadoop-aws-3.5.0") for j in jars)
    assert "spark.jars.packages" not in conf
    assert conf["spark.sql.catalog.spark_catalog"].endswith("DeltaCatalog")
    assert conf["spark.hadoop.fs.s3.impl"] == conf["spark.hadoop.fs.s3a.impl"]
    assert not any("secret" in k.lower() or "access.key" in k.lower() for k in conf)
    # an ingest plans more distinct queries than Spark's 100 cached compiled classes: kept, and
    # shipped to spark-submit alike
    assert conf["spark.sql.codegen.cache.maxEntries"] == "2000"
    assert spark_submit_kwargs(binlake_config)["conf"]["spark.sql.codegen.cache.maxEntries"] == "2000"  # type: ignore[index]


def test_cluster_conf_uses_spark_jars(binlake_config: BinlakeConfig) -> None:
    shipped = replace(binlake_config, spark=replace(binlake_config.spark, master="spark://m:7077"))
    jars = spark_conf(shipped)["spark.jars"].split(",")
    assert jars and all(Path(j).is_file() for j in jars)
    # jars mounted on the workers: referenced in place on both classpaths, never copied by spark.jars
    mounted = replace(shipped, spark=replace(shipped.spark, jars_on_workers=True))
    conf = spark_conf(mounted)
    assert "spark.jars" not in conf
    executor_cp = conf["spark.executor.extraClassPath"].split(os.pathsep)
    assert executor_cp == jars and conf["spark.driver.extraClassPath"] == conf["spark.executor.extraClassPath"]
    kw = spark_submit_kwargs(mounted)
    assert "jars" not in kw and kw["conf"]["spark.executor.extraClassPath"] == conf["spark.executor.extraClassPath"]  # type: ignore[index]


def test_jars_dir_has_no_duplicates_of_pyspark_jars(binlake_config: BinlakeConfig) -> None:
    """conf/pom.xml excludes what pyspark ships (hadoop-client-*, jackson-core, parquet, ...)."""
    import pyspark

    shipped = {p.name.rsplit("-", 1)[0] for p in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}
    ours = {Path(j).name.rsplit("-", 1)[0] for j in jar_paths(binlake_config.jars_dir)}
    assert not (ours & shipped), f"duplicate jars: {sorted(ours & shipped)}"
    assert not any(n.startswith("hadoop-client") for n in ours)


def test_missing_jars_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(MissingJarsError, match="make setup"):
        jar_paths(tmp_path)


def test_spark_submit_helpers(binlake_config: BinlakeConfig) -> None:
    kw = spark_submit_kwargs(binlake_config)  # submit mode: jars shipped unless on the workers
    assert kw["conn_id"] == "spark_default"
    assert "delta-spark_" in str(kw["jars"])
    assert "spark.jars" not in kw["conf"]  # type: ignore[operator]
    assert kw["conf"]["spark.sql.extensions"] == DELTA_EXTENSION  # type: ignore[index]


def test_ddl_schema_reads_what_sparks_parser_reads(spark: Any) -> None:
    """``ddl_schema`` (no JVM) gives the StructType Spark's own parser gives, field by field with
    nullability, for a gold table of every type ``spark_type`` writes, its ``__history`` table and a
    table without a key (``_copies``); a type binlake never writes is an error, not a guess."""
    from binlake.gold.schema_history import TableSchema
    from binlake.gold.types import MySQLColumn, spark_type
    from spark_jobs.errors import SparkJobError
    from spark_jobs.gold.tables import gold_schema_ddl, history_schema_ddl
    from spark_jobs.session import ddl_schema

    mysql = [("tinyint", False), ("tinyint", True), ("smallint", True), ("mediumint", False), ("int", True),
             ("bigint", False), ("bigint", True), ("decimal", False), ("float", False), ("double", False),
             ("year", False), ("date", False), ("datetime", False), ("timestamp", False), ("vector", False),
             ("blob", False), ("varchar", False)]
    columns = tuple(MySQLColumn(f"c{i}`q" if i == 3 else f"c{i}", t, unsigned=u,
                                precision=12 if t == "decimal" else None, scale=2 if t == "decimal" else None)
                    for i, (t, u) in enumerate(mysql))
    assert {spark_type(c) for c in columns} == {
        "TINYINT", "SMALLINT", "INT", "BIGINT", "DECIMAL(20,0)", "DECIMAL(12,2)", "FLOAT", "DOUBLE", "DATE",
        "TIMESTAMP_NTZ", "TIMESTAMP", "ARRAY<FLOAT>", "BINARY", "STRING"}
    for schema in (TableSchema(columns, ("c0",)), TableSchema(columns, ())):
        for ddl in (gold_schema_ddl(schema), history_schema_ddl(schema)):
            theirs = spark.createDataFrame([], ddl).schema
            assert ddl_schema(ddl) == theirs, ddl
            assert [f.nullable for f in ddl_schema(ddl).fields] == [f.nullable for f in theirs.fields]
    with pytest.raises(SparkJobError, match="'MAP' is not one binlake writes"):
        ddl_schema("m MAP")
