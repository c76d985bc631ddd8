"""Shared pytest fixtures: a loopback S3 server, a test config, one SparkSession per session.

Why session-scoped: starting the JVM with the Delta/S3A jars costs ~10 s on 2 cores, and
moto's server is cheap but stateful; each test uses its own bucket / tmp folder instead.
Airflow is pointed at a throw-away AIRFLOW_HOME (SQLite) before anything imports it.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from binlake.config import REPO_ROOT, BinlakeConfig, config_from_dict
from binlake_testing.processes import SHORT_JVM_OPTIONS
from binlake_testing.s3server import DUMMY_AWS_ENV, S3Server


def _ci() -> bool:
    """Whether this is a CI run (``CI`` set, as in ``CI=true``): the hypothesis profile and the
    failing skips both follow it."""
    return os.environ.get("CI", "").lower() not in ("", "0", "false")


# --- hypothesis profiles (hostile-input / fuzz tests) -----------------------------------------
# "ci" (loaded when CI is set, as in CI=true): derandomized, so every run draws the same examples
# and a failure reproduces; no example database, no deadline (2 shared cores). "dev" (default):
# random examples, the local database replays past failures. Per-test @settings(max_examples=N)
# keep their own counts; HYPOTHESIS_PROFILE=<name> overrides the choice.
try:
    from hypothesis import HealthCheck as _HealthCheck
    from hypothesis import settings as _hyp_settings
except ImportError:  # pragma: no cover - hypothesis is a test dependency
    pass
else:
    _hyp_settings.register_profile(
        "ci", derandomize=True, database=None, deadline=None, max_examples=100, print_blob=True,
        suppress_health_check=[_HealthCheck.too_slow])
    _hyp_settings.register_profile(
        "dev", deadline=None, max_examples=100, suppress_health_check=[_HealthCheck.too_slow])
    _hyp_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if _ci() else "dev"))
# --- end hypothesis profiles --------------------------------------------------------------------


_AIRFLOW_HOME = pytest.StashKey[Path]()


def pytest_configure(config: pytest.Config) -> None:
    """Isolate Airflow and AWS from the developer's machine before any test imports them."""
    home = Path(tempfile.mkdtemp(prefix="binlake-airflow-"))
    config.stash[_AIRFLOW_HOME] = home
    os.environ["AIRFLOW_HOME"] = str(home)
    os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
    os.environ["AIRFLOW__CORE__DAGS_FOLDER"] = str(REPO_ROOT / "dags")
    os.environ["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] = f"sqlite:///{home}/airflow.db"
    os.environ["AIRFLOW__CORE__UNIT_TEST_MODE"] = "False"
    # Never let a test reach real AWS credentials or config files.
    os.environ.update(DUMMY_AWS_ENV)
    os.environ["AWS_CONFIG_FILE"] = str(home / "aws-config-none")
    os.environ["AWS_SHARED_CREDENTIALS_FILE"] = str(home / "aws-credentials-none")
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # py4j logs "Closing down clientserver connection" from __del__ after pytest closed its streams.
    logging.getLogger("py4j").setLevel(logging.WARNING)


def pytest_unconfigure(config: pytest.Config) -> None:
    """Remove the session's Airflow home (its database and logs, a few MB a session)."""
    home = config.stash.get(_AIRFLOW_HOME, None)
    if home is not None:
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    """moto in server mode on 127.0.0.1:<random port>, shared by the whole session."""
    with S3Server(mode="thread") as server:
        yield server


@pytest.fixture(scope="session")
def s3_process() -> Iterator[S3Server]:
    """moto as its own process: delta-rs's requests would wait on an in-process server's GIL."""
    with S3Server(mode="process") as server:
        yield server


@pytest.fixture(scope="session")
def s3_client(s3_server: S3Server) -> Any:
    return s3_server.client()


@pytest.fixture()
def s3_bucket(s3_client: Any) -> str:
    """A fresh, uniquely named bucket for one test."""
    name = f"t-{uuid.uuid4().hex[:12]}"
    s3_client.create_bucket(Bucket=name)
    return name


@pytest.fixture(scope="session")
def session_tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("binlake")


#: The whole test session shares one driver JVM, and Delta keeps a DeltaLog (with its snapshot's
#: plans) for every table path it has seen: hundreds of throw-away tables here. Measured in full
#: runs: with a 1 GiB driver and the default cache (10,000 entries) the old generation was ~87%
#: full after 18 minutes and G1 had run 406 concurrent cycles; with 2 GiB and 64 entries (a test
#: reuses a handful of tables), 242 cycles at the same point.
#: The driver JVM of a test session compiles with C1 only and collects with the serial GC: a test
#: runs many small, different Spark jobs (little code gets hot enough for C2 to pay back what it
#: costs), on 2 cores shared by the xdist workers (G1's concurrent threads compete with them).
#: For tests only: a production run is long and hot, where C2 and G1 are the right defaults.
#: ``BINLAKE_TEST_JVM_OPTIONS`` replaces them (empty: the JVM's defaults, to measure against).
TEST_JVM_OPTIONS = os.environ.get("BINLAKE_TEST_JVM_OPTIONS", SHORT_JVM_OPTIONS)
#: Test sessions evaluate expressions interpreted instead of generating and compiling Java for every
#: plan: the tests' data is a few hundred rows, so a query's time is its planning, and a profile
#: (JFR) of test_gold_osc's JVM had two fifths of its samples in code generation, in the driver and
#: in the tasks (building the source text of Delta's wide log-replay projections, Janino, loading the
#: classes), most of it again for plans whose compiled class was cached. Spark evaluates the same
#: expressions either way (its own suite runs both modes against each other); production sessions
#: keep code generation (and fall back to these interpreted forms where a generated class fails to
#: compile). ``BINLAKE_TEST_SPARK_CODEGEN=1`` keeps code generation in the test sessions too
#: (docs/testing.md).
TEST_CODEGEN_OFF = {} if os.environ.get("BINLAKE_TEST_SPARK_CODEGEN", "") not in ("", "0") else {
    "spark.sql.codegen.wholeStage": "false", "spark.sql.codegen.factoryMode": "NO_CODEGEN"}
TEST_SESSION_SPARK_CONF: dict[str, str] = {"spark.databricks.delta.delta.log.cacheSize": "64",
                                           **TEST_CODEGEN_OFF,
                                           **({"spark.driver.extraJavaOptions": TEST_JVM_OPTIONS}
                                              if TEST_JVM_OPTIONS else {})}


def make_test_config(tmp: Path, endpoint: str, **overrides: Any) -> BinlakeConfig:
    """A config for tests: local warehouse in ``tmp``, the loopback S3 endpoint, Spark UI off.

    ``[gold] incremental_min_changes = 0``: the tests' tables hold a few dozen row changes, under
    the production floor (50,000) below which gold replays a table in full; the gold tests are about
    the incremental path's rules and fallbacks, so they take it wherever it is exact.
    ``[lineage] enabled = false``: the OpenLineage listener runs a Spark job per Delta input of a
    query (docs/lineage.md, "Cost"); tests/test_lineage.py checks lineage. Configs the tests write
    as files (the Airflow and CLI runs) keep the production defaults of both."""
    raw: dict[str, Any] = {
        "pipeline": {
            "warehouse": str(tmp / "warehouse"),
            "state_dir": str(tmp / "state"),
            "jars_dir": os.environ.get("BINLAKE_JARS_DIR", str(REPO_ROOT / ".jars")),
        },
        "sources": [{"name": "mariadb-10.11", "uri": str(REPO_ROOT / "tests/fixtures/mariadb-10.11")}],
        "s3": {"endpoint_url": endpoint, "path_style_access": True, "max_attempts": 3},
        "spark": {"master": "local[2]", "shuffle_partitions": 2, "ui_enabled": False, "driver_memory": "2g",
                  "conf": dict(TEST_SESSION_SPARK_CONF)},
        "gold": {"incremental_min_changes": 0},
        "lineage": {"enabled": False},
    }
    for section, values in overrides.items():
        if isinstance(values, dict):
            raw.setdefault(section, {}).update(values)
        else:
            raw[section] = values
    return config_from_dict(raw, base=REPO_ROOT, env={})


@pytest.fixture(scope="session")
def binlake_config(session_tmp: Path, s3_server: S3Server) -> BinlakeConfig:
    """The session's test config (warehouse under a tmp dir, S3 = the loopback moto server)."""
    return make_test_config(session_tmp, s3_server.endpoint_url)


@pytest.fixture(scope="session")
def spark(binlake_config: BinlakeConfig) -> Iterator[Any]:
    """One SparkSession (Delta + S3A against the loopback server) for the whole test session."""
    from spark_jobs.session import build_spark_session, stop_session

    session = build_spark_session(binlake_config, "binlake-tests", ui=False)
    try:
        yield session
    finally:
        stop_session(session)


# --- order of the modules for `pytest -n 3` (pytest-xdist, `make test`) --------------------------
#: Modules that take longest on their own, longest first (fresh-clone CI log, --durations). With
#: ``--dist loadfile --no-loadscope-reorder`` xdist hands whole modules to its workers in collection
#: order, so these start first and the many short modules fill in around them: the scale-out
#: module (mostly waiting on Airflow's services and the cluster's JVMs) overlaps with the others
#: instead of running last alone. A module missing from this list keeps its place after them.
#: test_maintenance and test_history_mariadb (new, not in a whole run yet) are placed by their
#: time alone on a loaded machine: ~530 s and ~190 s at load 12-18; test_catalog (82 s for one
#: test in the 0576e18 run) and test_commit_campaign (68 s) by their slowest items.
LONGEST_FIRST = (
    "test_scale_out.py",
    "test_gold_osc.py",
    "test_gold_fixture.py",
    "test_gold_mariadb.py",
    "test_maintenance.py",
    "test_dags.py",
    "test_ingest.py",
    "test_lineage.py",
    "test_connect_mode.py",
    "test_history_mariadb.py",
    "test_catalog.py",
    "test_catalog_postgres.py",
    "test_row_image_text.py",
    "test_commit_campaign.py",
    "test_archiver.py",
    "test_concurrent_writes.py",
    "test_demo_dag.py",
    "test_gold_mysql8.py",
    "test_fuzz_rows.py",
    "test_run_local.py",
    "test_sql_cli.py",
    "test_orchestration_tasks.py",
    "test_gold_seed_mariadb.py",
    "test_reconcile.py",
    "test_spark_auth.py",
    "test_sql_guard.py",
    "test_lock_races.py",
    "test_ddl_corpus.py",
    "test_archiver_peer.py",
)


# --- honest counts under CI ---------------------------------------------------------------------
#: Skips that stay skips under CI: opt-in runs and optional peers, by a word of their reason. Every
#: other skip means a required part is missing (the extension, MariaDB, mariadb-binlog, chromium,
#: openssl, ...) and fails a CI run (``CI=true``), so a green CI run ran everything it claims.
OPTIONAL_SKIPS = ("BINLAKE_CAMPAIGN_STOCK", "peer not built")
OPTIONAL_SKIPS += ("postgres not installed",)  # test_catalog_postgres: an optional part, like the peers


def _fail_required_skip(report: pytest.TestReport | pytest.CollectReport) -> None:
    reason = str(report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr)
    if _ci() and report.skipped and not any(word in reason for word in OPTIONAL_SKIPS):
        report.outcome = "failed"
        report.longrepr = f"skipped under CI, a required part is missing: {reason}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    _fail_required_skip(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Iterator[None]:
    outcome = yield
    _fail_required_skip(outcome.get_result())


# --- cost classes (`make test-fast` runs `-m unit`) ---------------------------------------------
#: What makes a test costly, as the fixtures it uses: a class applies when a test uses one of these.
COST_FIXTURES: dict[str, frozenset[str]] = {
    "spark": frozenset({"spark"}),
    "s3": frozenset({"s3_server", "s3_process", "s3_client", "s3_bucket", "binlake_config"}),
}
#: ... and as what its module (or a tests/_*.py helper it imports) starts by itself, in its text.
COST_WORDS: dict[str, tuple[str, ...]] = {
    "spark": ("pyspark", "run_ingest", "run_gold", "spark_jobs.steps", "spark_session", "SparkSession",
              "spark_cluster", "_scenario_warehouse"),
    "s3": ("S3Server", "s3server", "moto_atomic", "fault_proxy"),
    "mariadb": ("mariadb_server", "MariaDBServer", "mariadb-binlog", "mariadb_binlog"),
    "airflow": ("airflow", "run_local", "dag.test"),
    "slow": ("subprocess", "spark-submit", "cargo", "build_wheel", "mvn "),
}
#: The cost classes; ``unit`` is a test with none of them (pure: no JVM, no server, no process).
COST_CLASSES = ("spark", "s3", "mariadb", "airflow", "cluster", "campaign", "slow")
_MODULE_COSTS: dict[Path, frozenset[str]] = {}


def module_costs(path: Path) -> frozenset[str]:
    """The cost classes a test module's text (and its tests/_*.py helpers') shows."""
    if path not in _MODULE_COSTS:
        text = path.read_text()
        for helper in sorted(path.parent.glob("_*.py")):
            if f"{helper.stem}" in text:
                text += helper.read_text()
        _MODULE_COSTS[path] = frozenset(c for c, words in COST_WORDS.items() if any(w in text for w in words))
    return _MODULE_COSTS[path]


def mark_cost(item: pytest.Item) -> None:
    """Mark ``item`` with its cost classes, or ``unit`` when it has none."""
    names = set(getattr(item, "fixturenames", ()))
    costs = {c for c, fixtures in COST_FIXTURES.items() if names & fixtures} | module_costs(item.path)
    costs |= {m.name for m in item.iter_markers() if m.name in COST_CLASSES}
    for cost in sorted(costs) or ["unit"]:
        item.add_marker(cost)


@pytest.fixture(autouse=True)
def _unit_starts_no_jvm(request: pytest.FixtureRequest) -> Iterator[None]:
    """In the fast loop (``BINLAKE_UNIT_ONLY=1``, `make test-fast`), a test marked ``unit`` that
    starts a JVM fails: its cost class is wrong (add the word that gives it away to COST_WORDS)."""
    yield
    if os.environ.get("BINLAKE_UNIT_ONLY") and request.node.get_closest_marker("unit") is not None:
        context = sys.modules.get("pyspark") and sys.modules.get("pyspark.core.context")
        active = getattr(getattr(context, "SparkContext", None), "_active_spark_context", None)
        assert active is None, f"{request.node.nodeid} is marked unit but started Spark"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Cost markers on every item; longest modules first when xdist runs the suite (a stable
    sort: order within a module kept)."""
    for item in items:
        mark_cost(item)
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))
