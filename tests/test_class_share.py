"""The local driver's class-data sharing archive (spark_jobs.session, docs/operations.md): which file a
classpath maps to, and what a session's conf gets with and without one. No JVM: the archive's effect on
a JVM is measured in docs/operations.md; here a file of the right name is enough."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from binlake.config import config_from_dict
from spark_jobs.session import REQUIRED_JAR_PREFIXES, class_share_archive, spark_submit_kwargs, with_class_share


@pytest.fixture()
def jars(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A jars dir with the required jars and a Spark home with one jar of its own (empty files)."""
    folder = tmp_path / "jars"
    folder.mkdir()
    for prefix in REQUIRED_JAR_PREFIXES:
        (folder / f"{prefix}1.0.jar").write_bytes(b"x")
    spark_home = tmp_path / "spark"
    (spark_home / "jars").mkdir(parents=True)
    (spark_home / "jars" / "spark-core.jar").write_bytes(b"y")
    monkeypatch.setenv("SPARK_HOME", str(spark_home))
    monkeypatch.delenv("BINLAKE_SPARK_CDS", raising=False)
    return folder


def local_conf(jars: Path) -> dict[str, str]:
    return {"spark.driver.extraClassPath": os.pathsep.join(str(p) for p in sorted(jars.glob("*.jar"))),
            "spark.driver.extraJavaOptions": "-XX:+UseSerialGC"}


def test_a_changed_jar_or_spark_jar_names_another_archive(jars: Path, tmp_path: Path) -> None:
    first = class_share_archive(jars)
    assert first.parent == jars / "cds" and first.name.startswith("spark-") and first.suffix == ".jsa"
    assert class_share_archive(jars) == first
    (jars / "bundle-1.0.jar").write_bytes(b"longer")
    second = class_share_archive(jars)
    assert second != first
    (tmp_path / "spark" / "jars" / "spark-sql.jar").write_bytes(b"z")
    assert class_share_archive(jars) not in (first, second)


def test_a_session_maps_the_archive_only_when_it_exists_for_its_classpath(jars: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    conf = local_conf(jars)
    assert with_class_share(conf, jars) == conf  # no archive: the JVM starts as before
    archive = class_share_archive(jars)
    archive.parent.mkdir()
    archive.write_bytes(b"jsa")
    shared = with_class_share(conf, jars)
    assert shared["spark.driver.extraJavaOptions"] == (
        f"-XX:SharedArchiveFile={archive} -Xshare:auto -Xlog:cds*=off -Xlog:class+path=off -XX:+UseSerialGC")
    assert {k: v for k, v in shared.items() if k != "spark.driver.extraJavaOptions"} == {
        k: v for k, v in conf.items() if k != "spark.driver.extraJavaOptions"}
    # a cluster driver (jars shipped with spark.jars) keeps its options
    cluster = {"spark.jars": ",".join(str(p) for p in jars.glob("*.jar"))}
    assert with_class_share(cluster, jars) == cluster
    monkeypatch.setenv("BINLAKE_SPARK_CDS", "0")
    assert with_class_share(conf, jars) == conf
    # a stale archive (a jar changed since) is not used
    monkeypatch.delenv("BINLAKE_SPARK_CDS")
    (jars / "hadoop-aws-1.0.jar").write_bytes(b"newer")
    assert with_class_share(conf, jars) == conf


def test_a_spark_submit_driver_with_the_jars_on_the_workers_maps_it(jars: Path, tmp_path: Path) -> None:
    archive = class_share_archive(jars)
    archive.parent.mkdir()
    archive.write_bytes(b"jsa")
    spark: dict[str, object] = {"mode": "submit", "master": "spark://127.0.0.1:7077"}
    pipeline = {"warehouse": str(tmp_path / "wh"), "state_dir": str(tmp_path / "st"), "jars_dir": str(jars)}
    raw: dict[str, object] = {"pipeline": pipeline,
           "lineage": {"enabled": False}, "spark": spark}
    shipped = spark_submit_kwargs(config_from_dict(raw, tmp_path, env={}))["conf"]
    assert "spark.driver.extraJavaOptions" not in shipped  # type: ignore[operator]
    spark["jars_on_workers"] = True
    mounted = spark_submit_kwargs(config_from_dict(raw, tmp_path, env={}))["conf"]
    assert mounted["spark.driver.extraJavaOptions"].startswith(f"-XX:SharedArchiveFile={archive} ")  # type: ignore[index]
    assert "spark.executor.extraJavaOptions" not in mounted  # type: ignore[operator]
