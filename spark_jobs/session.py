"""SparkSession and spark-submit settings for binlake (Delta Lake + S3A, jars from Maven).

Why here: every Spark entry point (tests, the demo, Airflow tasks in local mode, spark-submit in
cluster mode, ``binlake sql``) must agree on the same jars and the same Delta/S3A settings; one
function builds the conf map and both the in-process builder and the spark-submit helper use it.

The jars are the ones ``make setup`` copied with Maven into the jars dir (``conf/pom.xml``); they
go in via ``spark.jars`` / ``--jars`` for cluster runs and, for in-process ``local[*]`` sessions, via
``spark.driver.extraClassPath`` (same files, no per-session copy). Spark never resolves packages
through Ivy when it starts.
Nothing here starts Spark at import time; pyspark is imported lazily.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import logging
import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

from binlake.config import BinlakeConfig, config_from_dict
from binlake.lake.catalog import metastore_conf
from spark_jobs.errors import MissingJarsError, SparkJobError

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa
    from pyspark.sql import DataFrame, Row, SparkSession
    from pyspark.sql.types import StructType

T = TypeVar("T")
R = TypeVar("R")

log = logging.getLogger(__name__)

DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"
S3A_FS = "org.apache.hadoop.fs.s3a.S3AFileSystem"
#: binlake's Delta LogStore for S3 (jvm/logstore, built by `make setup`): a commit is a put-if-absent
#: of ``_delta_log/N.json`` (S3A's conditional create, ``If-None-Match: *``), so two drivers committing
#: one version cannot both succeed; Delta's own ``S3SingleDriverLogStore`` checks then PUTs, and the
#: later of two drivers' commits of version N replaced the earlier one (a lost commit).
S3_LOG_STORE = "dev.binlake.delta.S3ConditionalPutLogStore"
# Spark's jar for S3A, the SDK bundle and binlake's LogStore must be present; anything else is up to the pom.
REQUIRED_JAR_PREFIXES = ("delta-spark_", "delta-storage-", "hadoop-aws-", "bundle-", "binlake-logstore-")
#: compiled query classes a session keeps (``spark.sql.codegen.cache.maxEntries``, default 100)
CODEGEN_CACHE_ENTRIES = 2000


def jar_paths(jars_dir: str | os.PathLike[str]) -> list[str]:
    """Absolute paths of the jars in ``jars_dir`` (sorted), checked for the required ones."""
    folder = Path(jars_dir)
    jars = sorted(str(p.resolve()) for p in folder.glob("*.jar")) if folder.is_dir() else []
    names = [Path(j).name for j in jars]
    missing = [p for p in REQUIRED_JAR_PREFIXES if not any(n.startswith(p) for n in names)]
    if missing:
        raise MissingJarsError(
            f"jars dir {folder} lacks {', '.join(m.rstrip('_-') for m in missing)}: run `make setup` in a "
            "checkout (fetches them with Maven from conf/pom.xml and builds binlake-logstore from jvm/logstore), "
            "or point [pipeline] jars_dir "
            "(BINLAKE_JARS_DIR for the demo) at a folder holding them"
        )
    return jars


def jars_conf(cfg: BinlakeConfig, *, submit: bool = False) -> dict[str, str]:
    """How the jars reach the driver and the executors.

    * an in-process ``local[*]`` session: driver == executor, the jars go straight on the JVM
      classpath. (``submit``: spark-submit's master is the Airflow connection's, so never this.)
    * a cluster whose workers have the jars dir at the same path (``spark.jars_on_workers``, as in
      docker-compose.yml and the loopback test cluster): on the driver's and the executors'
      ``extraClassPath``. Why not ``spark.jars`` with ``local:`` URLs: Spark 4 still copies each of
      them into every executor's work dir (per application; most of it the AWS SDK bundle),
      which made a small step cost minutes.
    * otherwise ``spark.jars``: Spark ships them from the driver to each executor.
    """
    paths = jar_paths(cfg.jars_dir)
    classpath = os.pathsep.join(paths)
    if cfg.spark.master.startswith("local") and not submit:
        return {"spark.driver.extraClassPath": classpath}
    if cfg.spark.jars_on_workers:
        return {"spark.driver.extraClassPath": classpath, "spark.executor.extraClassPath": classpath}
    return {"spark.jars": ",".join(paths)}


#: The driver JVM's class-data sharing archive (AppCDS): a local-mode step's JVM loads ~20k classes
#: (Spark, Delta, Hadoop, the AWS SDK) and spent a third of its start-up CPU parsing and verifying
#: them; with the classes mapped from an archive one JVM dumped at exit, a session start plus a small
#: Delta read costs a fifth to a third less JVM CPU (docs/operations.md, "Class-data sharing").
#: The archive is only valid for the exact app classpath and JVM it was built with, so its file name
#: carries a key of those (:func:`class_share_archive`): a changed jar or JDK finds no archive, and
#: the JVM starts as before, only slower. ``BINLAKE_SPARK_CDS=0`` turns it off.
CDS_DIR = "cds"
CDS_OFF_ENV = "BINLAKE_SPARK_CDS"
#: a present but unusable archive (a JVM update in place) only disables sharing: no warning lines
CDS_QUIET = "-Xshare:auto -Xlog:cds*=off -Xlog:class+path=off"


def _spark_jars_dir() -> Path:
    """The jars folder the launcher puts on the driver's classpath (SPARK_HOME's, else pyspark's)."""
    home = os.environ.get("SPARK_HOME")
    if home:
        return Path(home) / "jars"
    import pyspark

    return Path(pyspark.__file__).parent / "jars"


def class_share_archive(jars_dir: str | os.PathLike[str]) -> Path:
    """Where the archive for these jars, Spark's own and the ``java`` on PATH lives (it may not exist):
    ``<jars_dir>/cds/spark-<key>.jsa``, the key a hash of each jar's path, size and mtime."""
    import hashlib
    import shutil

    java = shutil.which("java", path=os.path.join(os.environ["JAVA_HOME"], "bin")) if os.environ.get("JAVA_HOME") \
        else shutil.which("java")
    digest = hashlib.sha256(str(Path(java).resolve() if java else "").encode())
    for jar in [*jar_paths(jars_dir), *sorted(str(j) for j in _spark_jars_dir().glob("*.jar"))]:
        st = os.stat(jar)
        digest.update(f"\0{jar}\0{st.st_size}\0{st.st_mtime_ns}".encode())
    return Path(jars_dir) / CDS_DIR / f"spark-{digest.hexdigest()[:16]}.jsa"


def with_class_share(conf: dict[str, str], jars_dir: str | os.PathLike[str]) -> dict[str, str]:
    """``conf`` with the driver JVM mapping the class archive, when there is one for this classpath
    (an in-process local session: the jars on ``spark.driver.extraClassPath``); else ``conf``."""
    if "spark.driver.extraClassPath" not in conf or os.environ.get(CDS_OFF_ENV, "") == "0":
        return conf
    archive = class_share_archive(jars_dir)
    if not archive.is_file():
        return conf
    options = f"-XX:SharedArchiveFile={archive} {CDS_QUIET} {conf.get('spark.driver.extraJavaOptions', '')}"
    return {**conf, "spark.driver.extraJavaOptions": options.strip()}


def build_class_share_archive(jars_dir: str | os.PathLike[str] = ".jars") -> Path:
    """Build the archive (``make setup``) unless the one for this classpath exists: a local session
    started with ``-XX:ArchiveClassesAtExit`` writes and reads a small Delta table, and its JVM dumps
    the classes it loaded as it exits. Older archives in the folder are removed (each is the size of the classes it holds)."""
    import tempfile

    archive = class_share_archive(jars_dir)
    if archive.is_file():
        return archive
    archive.parent.mkdir(parents=True, exist_ok=True)
    partial = archive.with_suffix(f".{os.getpid()}.part")
    with tempfile.TemporaryDirectory(prefix="binlake-cds-") as tmp:
        # the settings a step's session gets (spark_conf), on a throwaway warehouse: the classes it
        # loads are the ones a real start loads
        cfg = config_from_dict({"pipeline": {"warehouse": f"{tmp}/warehouse", "state_dir": f"{tmp}/state",
                                             "jars_dir": str(Path(jars_dir).resolve())},
                                "spark": {"master": "local[2]", "shuffle_partitions": 2, "ui_enabled": False}},
                               base=Path(tmp), env={})
        spark = build_spark_session(cfg, "binlake-cds", extra={
            "spark.driver.extraJavaOptions": f"-XX:ArchiveClassesAtExit={partial} -Xlog:cds=off"})
        spark.sparkContext.setLogLevel("ERROR")
        table = f"{tmp}/warehouse/t"
        spark.range(100).selectExpr("id", "cast(id as string) AS s").write.format("delta").save(table)
        spark.read.format("delta").load(table).where("id > 10").count()
        gateway = spark.sparkContext._gateway
        stop_session(spark)
        proc = getattr(gateway, "proc", None)
        if proc is not None:  # the JVM exits when its stdin closes, dumping the archive first
            proc.stdin.close()
            proc.wait(timeout=300)
    if not partial.is_file():
        raise SparkJobError(f"the JVM wrote no class-data sharing archive at {partial}")
    for old in archive.parent.glob("spark-*.jsa"):
        old.unlink()
    os.replace(partial, archive)
    return archive


def s3a_conf(cfg: BinlakeConfig) -> dict[str, str]:
    """Hadoop S3A settings (prefixed ``spark.hadoop.``). No secrets: the provider chain finds them."""
    s3 = cfg.s3
    conf: dict[str, str] = {
        "spark.hadoop.fs.s3a.impl": S3A_FS,
        # s3:// and s3n:// URIs go through S3A as well.
        "spark.hadoop.fs.s3.impl": S3A_FS,
        "spark.hadoop.fs.s3n.impl": S3A_FS,
        "spark.hadoop.fs.s3a.aws.credentials.provider": s3.credentials_provider,
        "spark.hadoop.fs.s3a.path.style.access": str(s3.path_style_access).lower(),
        "spark.hadoop.fs.s3a.endpoint.region": s3.region,
        "spark.hadoop.fs.s3a.attempts.maximum": str(s3.max_attempts),
        "spark.hadoop.fs.s3a.retry.limit": str(s3.max_attempts),
        "spark.hadoop.fs.s3a.connection.ssl.enabled": str(s3.ssl_enabled).lower(),
    }
    if s3.endpoint_url:
        conf["spark.hadoop.fs.s3a.endpoint"] = s3.endpoint_url
    return conf


def spark_conf(cfg: BinlakeConfig, *, include_jars: bool = True, ui: bool | None = None,
               catalog: bool = False) -> dict[str, str]:
    """The full Spark conf map for binlake: jars, Delta, S3A, sizing, plus ``[spark.conf]`` extras.

    ``catalog``: on binlake's persistent metastore (:func:`binlake.lake.catalog.metastore_conf`:
    ``binlake spark-conf``, ``binlake serve``, ``binlake catalog sync``) instead of the jobs'
    in-memory catalog.
    """
    sp = cfg.spark
    conf: dict[str, str] = {
        "spark.sql.extensions": DELTA_EXTENSION,
        "spark.sql.catalog.spark_catalog": DELTA_CATALOG,
        "spark.sql.shuffle.partitions": str(sp.shuffle_partitions),
        "spark.sql.session.timeZone": "UTC",
        "spark.ui.enabled": str(sp.ui_enabled if ui is None else ui).lower(),
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.warehouse.dir": str(Path(cfg.state_dir) / "spark-warehouse"),
        "spark.driver.memory": sp.driver_memory,
        # Small batch jobs on few cores: avoid the 200-partition default and Derby/Hive.
        "spark.sql.catalogImplementation": "in-memory",
        "spark.databricks.delta.snapshotPartitions": "2",
        "spark.sql.adaptive.enabled": "true",
        # Spark keeps 100 compiled query classes by default; one ingest plans more distinct ones
        # (seven Delta replace-writes, their stats, log replays), so every run compiled ~60-100
        # classes again with Janino, and the JIT compiled those; 2000 kept 8-32 (issue 13).
        "spark.sql.codegen.cache.maxEntries": str(CODEGEN_CACHE_ENTRIES),
        # Every S3 flavour commits through the put-if-absent LogStore (s3:// and s3n:// go through S3A
        # too); `[spark.conf]` may name another store (docs/operations.md, "What is safe with which stores").
        "spark.delta.logStore.s3a.impl": S3_LOG_STORE,
        "spark.delta.logStore.s3.impl": S3_LOG_STORE,
        "spark.delta.logStore.s3n.impl": S3_LOG_STORE,
    }
    if include_jars:
        conf.update(jars_conf(cfg))
    conf.update(s3a_conf(cfg))
    conf.update(sp.extra_conf)
    if catalog:  # after [spark.conf]: it has taken that table's metastore keys and driver options in
        conf.update(metastore_conf(cfg))
    conf.update({k: v for k, v in lineage_conf(cfg).items() if k not in sp.extra_conf})
    return conf


#: OpenLineage's Spark listener (conf/pom.xml); docs/lineage.md
OPENLINEAGE_LISTENER = "io.openlineage.spark.agent.OpenLineageSparkListener"
OPENLINEAGE_JAR_PREFIX = "openlineage-spark_"


def quiet_lineage_logs(spark: SparkSession) -> None:
    """The listener's plan walkers off the log: they print an ERROR ("Query execution is null") for
    every short Delta-internal query and a WARN for each plan node without a dataset, none of which
    is a fault; its transport's failures (an unreachable Marquez) still show."""
    jvm = spark.sparkContext._jvm
    if jvm is not None:
        # spark3: the column-lineage walkers' package (InputFieldsCollector's WARN per DDL plan node)
        for package in ("io.openlineage.spark.agent.lifecycle", "io.openlineage.spark3.agent.lifecycle"):
            jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(package, jvm.org.apache.logging.log4j.Level.OFF)


def lineage_conf(cfg: BinlakeConfig) -> dict[str, str]:
    """The OpenLineage listener's settings for ``[lineage]`` (file transport: ``spark.jsonl`` in the
    lineage folder), or none: lineage or its ``spark`` key off, or (an older jars folder) no
    listener jar there, which is said once in the log rather than failing every Spark start."""
    ln = cfg.lineage
    if not (ln.enabled and ln.spark):
        return {}
    if not any(Path(cfg.jars_dir).glob(OPENLINEAGE_JAR_PREFIX + "*.jar")):
        log.info("no %s*.jar in %s: Spark jobs emit no lineage (make setup fetches it)", OPENLINEAGE_JAR_PREFIX,
                 cfg.jars_dir)
        return {}
    conf = {"spark.extraListeners": OPENLINEAGE_LISTENER, "spark.openlineage.namespace": ln.namespace,
            "spark.openlineage.transport.type": ln.transport}
    if ln.transport == "http":
        conf.update({"spark.openlineage.transport.url": str(ln.url), "spark.openlineage.transport.endpoint": ln.endpoint})
    elif ln.transport == "file":
        folder = Path(ln.file_dir or Path(cfg.state_dir) / "lineage")
        folder.mkdir(parents=True, exist_ok=True)
        conf["spark.openlineage.transport.location"] = str(folder / "spark.jsonl")
    return conf


def build_spark_session(cfg: BinlakeConfig, app_name: str = "binlake", *, ui: bool | None = None,
                        master: str | None = None, catalog: bool = False,
                        extra: dict[str, str] | None = None) -> SparkSession:
    """A SparkSession with Delta + S3A configured (or the already-running one in this process).

    Static settings (jars, S3A endpoint) only take effect when this call starts the JVM; a second
    call in the same process returns the existing session, as ``getOrCreate`` does.
    ``catalog``: on the persistent metastore (see :func:`spark_conf`); ``extra``: settings on top
    (``binlake serve``'s Thrift port, the Spark Connect plugin).
    """
    from pyspark.sql import SparkSession

    if cfg.spark.mode == "connect" and not master and not catalog:
        return connect_session(cfg, app_name)
    # Python workers must use this interpreter (the venv), not whatever `python3` is on PATH.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if master and master != cfg.spark.master:
        cfg = dataclasses.replace(cfg, spark=dataclasses.replace(cfg.spark, master=master))
    master = cfg.spark.master
    if master.startswith("local"):
        # In-process runs stay on loopback (no hostname lookups, nothing exposed).
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder.appName(app_name).master(master)
    conf = with_class_share({**spark_conf(cfg, ui=ui, catalog=catalog), **(extra or {})}, cfg.jars_dir)
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    if not is_connect(spark):  # a Connect server keeps its own log level
        spark.sparkContext.setLogLevel(cfg.spark.log_level)
        if spark.sparkContext.getConf().get("spark.extraListeners", "") == OPENLINEAGE_LISTENER:
            quiet_lineage_logs(spark)
            atexit.unregister(_drain_listeners_at_exit)  # one entry however many steps build a session
            atexit.register(_drain_listeners_at_exit)
    return spark


#: the settings a Spark Connect client sets on its own session (runtime SQL settings; the static
#: ones, jars, Delta's extension and S3A, are the server's: ``binlake serve --connect``)
CONNECT_SESSION_KEYS = ("spark.sql.shuffle.partitions", "spark.sql.session.timeZone", "spark.sql.adaptive.enabled")


def connect_session(cfg: BinlakeConfig, app_name: str = "binlake") -> SparkSession:
    """``[spark] mode = "connect"``: a thin client of the Spark Connect server at ``[spark] remote``.

    Why: a step then starts no JVM of its own (seconds of CPU each); the server's JVM is warm and
    shared by every step of the night. The session's SQL settings are binlake's (UTC, the shuffle
    partitions), so the tables equal local mode's."""
    from pyspark.sql import SparkSession

    from spark_jobs.errors import SparkJobError

    try:
        spark = SparkSession.builder.remote(cfg.spark.remote).appName(app_name).getOrCreate()
        conf = spark_conf(cfg, include_jars=False)
        for key in CONNECT_SESSION_KEYS:
            spark.conf.set(key, conf[key])
    except Exception as exc:
        if isinstance(exc, SparkJobError):
            raise
        raise SparkJobError(
            f"cannot open a Spark Connect session at {cfg.spark.remote} ([spark] remote of "
            f"{cfg.config_path or 'the config'}): {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}; "
            "is `binlake serve --connect` running there?") from exc
    return spark


#: how long :func:`stop_session` waits for the listeners to handle the session's last events
LISTENER_DRAIN_SECONDS = 300


def _drain_listeners(spark_context: Any) -> None:
    """Wait (up to :data:`LISTENER_DRAIN_SECONDS`) until Spark's listeners have handled every event."""
    try:  # throws java.util.concurrent.TimeoutException when the listeners are not done by then
        spark_context._jsc.sc().listenerBus().waitUntilEmpty(LISTENER_DRAIN_SECONDS * 1000)
    except Exception as exc:  # noqa: BLE001 - a drain that fails must not keep the session open
        log.warning("Spark's listeners had not handled every event before the stop (%s); stopping anyway",
                    str(exc).splitlines()[0] if str(exc) else type(exc).__name__)


def _drain_listeners_at_exit() -> None:
    """At the interpreter's exit, drain the listeners of a session nobody stopped (a step's process
    ends with it running): the JVM's own shutdown hook stops the SparkContext, and would hang as
    :func:`stop_session` describes, leaving the JVM behind."""
    from pyspark import SparkContext

    active = SparkContext._active_spark_context
    if active is not None:
        _drain_listeners(active)


def stop_session(spark: SparkSession) -> None:
    """Stop ``spark`` after its listeners have handled every event it posted (a classic session; a
    Spark Connect client just closes).

    Why not ``spark.stop()`` alone: the OpenLineage listener (1.53.0, the newest on Maven Central)
    builds an input's statistics with ``HadoopFsRelation.inputFiles()``, which for a Delta table
    runs a Spark job on the listener thread (OpenLineage issue 4976). ``SparkContext.stop()`` stops
    the DAG scheduler before it drains the listener bus, so a query event still queued then waits
    for a job that never runs, and the stop never returns. Draining first runs those jobs while the
    scheduler still does."""
    if not is_connect(spark):
        _drain_listeners(spark.sparkContext)
    spark.stop()


def is_connect(spark: SparkSession) -> bool:
    """Whether ``spark`` is a Spark Connect client session (no ``sparkContext``, no RDDs, no ``_jvm``)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


class LazySession:
    """A step's Spark session, started the first time :func:`session_of` asks for it.

    Why: a small night's steps do their work in their own process (a few MB decoded, gold's small
    replays, delta-rs commits), and a Spark session costs more CPU than all of that (a JVM: tens of
    CPU-seconds; a Connect client: its imports and a server round trip per call). Only the paths
    that need Spark ask for it: a large night, a table delta-rs may not write, an old table's
    one-off re-partitioning (docs/architecture.md, "Where the JVM starts")."""

    def __init__(self, start: Callable[[], SparkSession]) -> None:
        self._start = start
        self._session: SparkSession | None = None

    def get(self) -> SparkSession:
        if self._session is None:
            self._session = self._start()
        return self._session

    @property
    def started(self) -> bool:
        return self._session is not None


def session_of(spark: SparkSource) -> SparkSession:
    """The session itself: ``spark``, or the :class:`LazySession`'s, started now if it was not."""
    return spark.get() if isinstance(spark, LazySession) else spark


def session_started(spark: SparkSource) -> bool:
    """Whether ``spark`` is a session, or a :class:`LazySession` some path started."""
    return spark.started if isinstance(spark, LazySession) else True


def run_on_executors(spark: SparkSession, fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
    """``fn(item)`` for every item, one Spark task each, on the executors; the results in ``items``' order.

    Why a DataFrame and not ``sparkContext.parallelize``: Spark Connect has no RDDs. A range of
    ``len(items)`` rows in as many partitions, mapped with ``mapInArrow``, is one task per item in
    every mode (local, submit, connect). ``fn`` and ``items`` travel pickled in the plan; each
    result comes back pickled in a BINARY column. ``fn``'s module must be importable on the
    workers: binlake is installed there (the venv; ``--py-files`` in submit mode)."""
    from pyspark.serializers import CloudPickleSerializer

    if not items:
        return []
    payload = list(items)

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow

        pickler = CloudPickleSerializer()
        for batch in batches:
            ids = batch.column(0).to_pylist()
            outs = [pickler.dumps(fn(payload[i])) for i in ids]
            yield pyarrow.RecordBatch.from_arrays([pyarrow.array(ids, pyarrow.int64()),
                                                   pyarrow.array(outs, pyarrow.binary())], names=["id", "out"])

    rows = spark.range(0, len(payload), 1, len(payload)).mapInArrow(run, "id long, out binary").collect()
    pickler = CloudPickleSerializer()
    by_id = {r["id"]: pickler.loads(bytes(r["out"])) for r in rows}
    return [by_id[i] for i in range(len(payload))]


#: the schema of :func:`map_partitions_tagged`'s output: a tag and one pickled value per row
TAGGED_DDL = "kind string, payload binary"
_TAGGED_BATCH = 1024


def map_partitions_tagged(df: DataFrame, fn: Callable[[Iterator[Row]], Iterable[tuple[str, Any]]]) -> DataFrame:
    """``fn`` over each partition of ``df`` (its rows as ``Row``s, the values classic PySpark's
    ``df.rdd.mapPartitions`` gives: naive local datetimes, ``bytes`` for BINARY); its
    ``(kind, value)`` pairs come back as rows of :data:`TAGGED_DDL`, the value pickled.

    Why: Spark Connect has no RDDs; ``mapInArrow`` runs the same Python over the same partitions in
    every mode. Read the result with :func:`tagged_values` (on the driver) or :func:`tagged_frame`
    (typed rows, on the executors)."""
    schema = df.schema

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow
        from pyspark.serializers import CloudPickleSerializer
        from pyspark.sql.conversion import ArrowTableToRowsConversion

        pickler = CloudPickleSerializer()

        def rows() -> Iterator[Row]:
            for batch in batches:
                table = pyarrow.Table.from_batches([batch])
                yield from ArrowTableToRowsConversion.convert(table, schema, binary_as_bytes=True)

        kinds: list[str] = []
        payloads: list[bytes] = []
        for kind, value in fn(rows()):
            kinds.append(kind)
            payloads.append(pickler.dumps(value))
            if len(kinds) >= _TAGGED_BATCH:
                yield pyarrow.RecordBatch.from_arrays([pyarrow.array(kinds, pyarrow.string()),
                                                       pyarrow.array(payloads, pyarrow.binary())], names=["kind", "payload"])
                kinds, payloads = [], []
        if kinds:
            yield pyarrow.RecordBatch.from_arrays([pyarrow.array(kinds, pyarrow.string()),
                                                   pyarrow.array(payloads, pyarrow.binary())], names=["kind", "payload"])

    return df.mapInArrow(run, TAGGED_DDL)


def tagged_values(tagged: DataFrame, *kinds: str) -> list[tuple[str, Any]]:
    """The ``(kind, value)`` pairs of :func:`map_partitions_tagged`'s output of the given kinds, on the driver."""
    from pyspark.serializers import CloudPickleSerializer
    from pyspark.sql import functions as F

    pickler = CloudPickleSerializer()
    rows = tagged.where(F.col("kind").isin(*kinds)).collect()
    return [(r["kind"], pickler.loads(bytes(r["payload"]))) for r in rows]


def tagged_frame(spark: SparkSession, tagged: DataFrame, kinds: Sequence[str], ddl: str,
                 as_row: Callable[[tuple[str, Any]], Sequence[Any]] = lambda kv: kv[1]) -> DataFrame:
    """A DataFrame of schema ``ddl`` holding ``as_row((kind, value))`` for every pair of ``kinds``:
    the values turned into typed columns on the executors, as ``spark.createDataFrame`` does
    (pyspark's own Python-to-Arrow conversion: a naive datetime is local time, as there)."""
    from pyspark.sql import functions as F

    schema = spark.createDataFrame([], ddl).schema

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark.serializers import CloudPickleSerializer
        from pyspark.sql.conversion import LocalDataToArrowConversion

        pickler = CloudPickleSerializer()
        for batch in batches:
            pairs = zip(batch.column(0).to_pylist(), batch.column(1).to_pylist())
            data = [as_row((kind, pickler.loads(payload))) for kind, payload in pairs]
            if data:
                yield from LocalDataToArrowConversion.convert(data, schema, False).to_batches()

    return _plain_types(spark, tagged.where(F.col("kind").isin(*kinds)).mapInArrow(run, ddl), schema)


#: the scalar types of the DDL binlake writes (gold's column types, its _meta and history columns)
_DDL_SCALARS = {"TINYINT": "byte", "SMALLINT": "short", "INT": "integer", "BIGINT": "long", "FLOAT": "float",
                "DOUBLE": "double", "BOOLEAN": "boolean", "STRING": "string", "BINARY": "binary", "DATE": "date",
                "TIMESTAMP": "timestamp", "TIMESTAMP_NTZ": "timestamp_ntz"}
_DDL_FIELD = re.compile(r"\s*(`(?:[^`]|``)+`|\w+)\s+(DECIMAL\(\d+,\s*\d+\)|ARRAY<\w+>|\w+)(\s+NOT\s+NULL)?\s*(?:,|$)",
                        re.IGNORECASE)


def ddl_schema(ddl: str) -> StructType:
    """The Spark schema of binlake's DDL text ``ddl`` (``name TYPE [NOT NULL], ...``), read in
    Python: what Spark's parser makes of it (tests/test_spark.py compares), without a session.

    Why not Spark's parser: asking it is a JVM call, and a small gold table written by delta-rs
    needs no JVM otherwise (docs/architecture.md, "Where the JVM starts"). Only the types
    :func:`binlake.gold.types.spark_type` and gold's own columns use are known; another is an error."""
    from pyspark.sql.types import ArrayType, DataType, DecimalType, StructField, StructType, _parse_datatype_json_value

    def scalar(name: str) -> DataType:
        if name.upper() not in _DDL_SCALARS:
            raise SparkJobError(f"DDL type {name!r} is not one binlake writes")
        return _parse_datatype_json_value(_DDL_SCALARS[name.upper()])

    fields, pos = [], 0
    while pos < len(ddl):
        m = _DDL_FIELD.match(ddl, pos)
        if m is None:
            raise SparkJobError(f"cannot read DDL {ddl!r} at {pos}")
        name, kind, not_null = m.groups()
        if name.startswith("`"):
            name = name[1:-1].replace("``", "`")
        upper = kind.upper()
        data_type: DataType
        if upper.startswith("DECIMAL("):
            precision, scale = (int(x) for x in upper[8:-1].split(","))
            data_type = DecimalType(precision, scale)
        elif upper.startswith("ARRAY<"):
            data_type = ArrayType(scalar(upper[6:-1]), True)
        else:
            data_type = scalar(kind)
        fields.append(StructField(name, data_type, nullable=not not_null))
        pos = m.end()
    return StructType(fields)


def local_frame(spark: SparkSession, rows: Sequence[Sequence[Any]], ddl: str) -> DataFrame:
    """A DataFrame of schema ``ddl`` holding ``rows`` (Python values, made in this process): what
    :func:`tagged_frame` makes on the executors, by the same conversion (``createDataFrame``'s)."""
    schema = ddl_schema(ddl)
    return _plain_types(spark, spark.createDataFrame(list(rows), schema), schema)


def local_arrow(rows: Sequence[Sequence[Any]], schema: StructType) -> pa.Table:
    """``rows`` (Python values) as the Arrow table Spark would write for them: pyspark's own
    conversion, the one :func:`tagged_frame` and ``createDataFrame`` use (a naive datetime is local
    time), with every column nullable, as a Spark Delta write stores a DataFrame's schema."""
    import pyarrow as pa
    from pyspark.sql.conversion import LocalDataToArrowConversion
    from pyspark.sql.pandas.types import to_arrow_schema

    if rows:
        table = LocalDataToArrowConversion.convert(list(rows), schema, False)
    else:
        table = to_arrow_schema(schema, timezone="UTC").empty_table()
    return table.cast(pa.schema([f.with_nullable(True) for f in table.schema]))


def _plain_types(spark: SparkSession, df: DataFrame, schema: StructType) -> DataFrame:
    """``df`` as written to Delta. A Spark Connect server gives Python-made string columns an
    explicit collation, and Delta then writes `string collate UTF8_BINARY` into the table's schema
    (which delta-rs cannot read); a cast to the same type drops it."""
    from pyspark.sql import functions as F

    if not is_connect(spark):
        return df
    return df.select(*[F.col("`" + f.name.replace("`", "``") + "`").cast(f.dataType.simpleString()).alias(f.name)
                       for f in schema.fields])


def default_parallelism(spark: SparkSession) -> int:
    """How many tasks the session runs at once by default (``sparkContext.defaultParallelism``;
    a Spark Connect client, which has no ``sparkContext``, asks the server with a range query:
    a range without a partition count gets that many partitions)."""
    if not is_connect(spark):
        return int(spark.sparkContext.defaultParallelism)
    from pyspark.sql import functions as F

    set_value = spark.conf.get("spark.default.parallelism", None)
    if set_value:
        return int(set_value)
    row = spark.range(0, 1 << 16).select(F.spark_partition_id().alias("p")).agg(F.max("p")).first()
    return int(row[0]) + 1 if row is not None and row[0] is not None else 1


@contextlib.contextmanager
def spark_session(cfg: BinlakeConfig, app_name: str = "binlake", **kwargs: object) -> Iterator[SparkSession]:
    """Context manager: yields a session; stops it on exit only if this call started it.

    Why: Airflow tasks run in-process under ``dag.test()`` and in tests that already hold a
    session; stopping a borrowed session would break the caller.
    """
    from pyspark.sql import SparkSession

    existed = SparkSession.getActiveSession() is not None
    spark = build_spark_session(cfg, app_name, **kwargs)  # type: ignore[arg-type]
    try:
        yield spark
    finally:
        if not existed:
            stop_session(spark)


def spark_submit_kwargs(cfg: BinlakeConfig) -> dict[str, object]:
    """Keyword arguments for Airflow's ``SparkSubmitOperator`` (jars, conf, conn_id).

    The same conf as :func:`build_spark_session`, minus the driver memory (the cluster's own
    defaults decide it); jars either shipped (``jars``) or referenced in place (extraClassPath).
    """
    conf = spark_conf(cfg, include_jars=False)
    conf.pop("spark.driver.memory", None)
    jars = jars_conf(cfg, submit=True)
    shipped = jars.pop("spark.jars", None)
    conf.update(jars)
    # jars on the workers: a client-mode driver on this host has the local sessions' classpath
    conf = with_class_share(conf, cfg.jars_dir)
    kwargs: dict[str, object] = {"conn_id": cfg.spark.conn_id, "conf": conf}
    if shipped:
        kwargs["jars"] = shipped
    return kwargs


if TYPE_CHECKING:  # pragma: no cover
    #: what a step's code takes where it needs Spark only on some paths: a session, or one started on first use
    SparkSource: TypeAlias = SparkSession | LazySession
