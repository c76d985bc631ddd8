"""``[spark] mode = "connect"``: the night's Spark steps as thin clients of one warm Spark Connect server.

One module-scoped ``binlake serve --connect`` (loopback, the Delta jars and extension on the server)
serves every step of the connect-mode run, its executors on a loopback Spark standalone cluster (a
master and one worker of 2 cores, started by this module: the executors are JVMs of their own, with
their own Python workers); the same archive is run in local mode in this
process (the session fixture's JVM). Two nights: the fixture chain's first file, then the other three.
Night 1 replays ``customer`` in the client process (its 3 row changes read with delta-rs, the rows
written through the server); night 2 brings it up to date incrementally through the server (its new
row changes MERGEd, no DDL) and writes ``orders`` in full by a Spark job (created, then its schema
changed: 7 changes, over ``[gold] in_process_changes``). After each night every table
(bronze, silver, meta, gold and its status) equals local mode's, by digest.

The connect-mode steps run in a child process: a process that has run classic Spark cannot open a
Spark Connect session. The Python that runs on the executors (decode, the gold replay) is not
shipped as an artifact: binlake is installed in the venv the server's Python workers run, and the
client checks that its tasks ran there, in another process. Every process the module started is
gone at its end.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from binlake.config import REPO_ROOT, BinlakeConfig, load_config
from binlake_testing.processes import binlake_serve
from binlake_testing.s3server import free_port
from binlake_testing.spark_cluster import SparkStandaloneCluster
from binlake_testing.table_digest import TableDigest, delta_table_digest, warehouse_digests
from spark_jobs.schemas import ALL_TABLES
from tests._chain_util import MARIADB_FILES, read_fixture

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(900)]

SOURCE = "alpha"
#: when and where a run happened, not what it wrote (as in test_scale_out)
VOLATILE_COLUMNS = frozenset({"run_id", "location", "updated_at", "silver_version"})
#: night 1 creates ``customer``; night 2 adds row changes of ``customer`` (no DDL: an incremental
#: MERGE) and creates and alters ``orders`` (a full replay)
NIGHTS = (MARIADB_FILES[:1], MARIADB_FILES[1:])

#: the connect-mode night, in its own process: discover, then every Spark step through the server
CLIENT = textwrap.dedent("""
    import os, sys
    from binlake.config import load_config
    from binlake.runs import discover
    from spark_jobs.session import build_spark_session, is_connect, run_on_executors
    from spark_jobs.steps import run_data_checks, run_spark_step

    import logging
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    logging.getLogger("spark_jobs.gold.replay").setLevel(logging.INFO)  # where each full replay ran
    cfg = load_config(sys.argv[1])
    run_id = sys.argv[2]
    spark = build_spark_session(cfg, "binlake-test-connect")
    assert is_connect(spark), type(spark)
    # the executors' Python: another process (the server's Python worker), binlake from the venv
    ((pid, where),) = run_on_executors(spark, lambda _: (os.getpid(), __import__("spark_jobs").__file__), [0])
    assert pid != os.getpid() and where.startswith(sys.argv[3]), (pid, where)
    discover("alpha", run_id, cfg=cfg)
    for step in ("decode", "reconcile", "gold"):
        result = run_spark_step(step, "alpha", run_id, cfg)
        assert result.ok, result
        if step == "gold":
            print("gold", sorted(result.write_modes.items()))
    run_data_checks("alpha", run_id, cfg)  # releases the source's run lease, as in the DAG
""")


def _config(folder: Path, archive: Path, *, mode: str, remote: str, master: str = "local[2]") -> BinlakeConfig:
    jars = os.environ.get("BINLAKE_JARS_DIR", str(REPO_ROOT / ".jars"))
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "binlake.toml"
    path.write_text("\n".join([
        "[pipeline]", f'warehouse = "{folder / "warehouse"}"', f'state_dir = "{folder / "state"}"',
        f'jars_dir = "{jars}"', "decode_in_process_bytes = 0  # decoded on the executors, through Connect", "",
        "[[sources]]", f'name = "{SOURCE}"', f'uri = "{archive}/"', "",
        "[spark]", f'mode = "{mode}"', f'master = "{master}"', "shuffle_partitions = 2", "ui_enabled = false",
        f'remote = "{remote}"', *(["jars_on_workers = true"] if master.startswith("spark://") else []), "",
        "[gold]", "incremental_min_changes = 0  # night 2's customer: the incremental MERGE, through Connect",
        "in_process_changes = 3  # night 1's customer (3 changes) replayed in the client, night 2's orders (7) by a Spark job",
        ""]))
    return load_config(path)


def _digests(cfg: BinlakeConfig) -> dict[str, TableDigest]:
    """Every table of the warehouse, the gold tables and their status included."""
    out = warehouse_digests(cfg.warehouse, ALL_TABLES, cfg.s3, VOLATILE_COLUMNS)
    base = Path(cfg.warehouse)
    names = ["silver/schema_history", "meta/gold_status"] + [f"gold/{p.name}" for p in sorted((base / "gold").iterdir())]
    for name in names:
        out[name] = delta_table_digest(name, str(base / name), cfg.s3, VOLATILE_COLUMNS)
    return out


def _replays(cfg: BinlakeConfig) -> dict[str, str]:
    """gold table -> how its last run replayed it (``meta.gold_status.replay``: full / incremental / none)."""
    from binlake.lake.delta_tables import open_delta_table

    table = open_delta_table(str(Path(cfg.warehouse) / "meta" / "gold_status"), cfg.s3)
    assert table is not None
    rows = table.to_pyarrow_table(columns=["gold_table", "replay"]).to_pylist()
    return {r["gold_table"]: r["replay"] for r in rows}


@dataclasses.dataclass
class Server:
    proc: subprocess.Popen[str]
    remote: str
    started: set[int]
    cluster: SparkStandaloneCluster


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """``binlake serve --no-thrift --connect`` on a free loopback port, its master the module's
    standalone cluster; stopped (SIGTERM) at the end, then the cluster."""
    folder = tmp_path_factory.mktemp("connect-server")
    port = free_port()
    remote = f"sc://127.0.0.1:{port}"
    with SparkStandaloneCluster(folder / "cluster", workers=1, cores=2, memory="1g") as cluster:
        cfg = _config(folder, folder / "no-archive", mode="local", remote=remote, master=cluster.master_url)
        args = ["--config", str(cfg.config_path), "--no-thrift", "--connect", "--connect-port", str(port)]
        started: set[int] = set(cluster.pids())
        with binlake_serve(args, cwd=folder, wait_seconds=300) as (proc, lines):
            assert f"Spark Connect: {remote}" in lines
            started.add(proc.pid)
            try:
                yield Server(proc, remote, started, cluster)
            finally:
                _remember(proc.pid, started)


def _remember(pid: int, started: set[int]) -> None:
    try:
        started.update(c.pid for c in psutil.Process(pid).children(recursive=True))
    except psutil.Error:
        pass


@pytest.fixture(scope="module")
def nights(server: Server, spark: Any, tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """Both nights in both modes: each night's digests per mode and the gold step's write modes."""
    from binlake.runs import discover
    from binlake.step_results import GoldStepResult
    from spark_jobs.steps import run_data_checks, run_spark_step

    tmp = tmp_path_factory.mktemp("connect-mode")
    archive = tmp / "archive"
    archive.mkdir()
    local = _config(tmp / "local", archive, mode="local", remote=server.remote)
    connect = _config(tmp / "connect", archive, mode="connect", remote=server.remote)
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    out = []
    for night, files in enumerate(NIGHTS, 1):
        for name in files:
            (archive / name).write_bytes(read_fixture(name))
        run_id = f"night{night}"
        t0 = time.monotonic()
        discover(SOURCE, run_id, cfg=local)
        modes: dict[str, str] = {}
        for step in ("decode", "reconcile", "gold"):
            result = run_spark_step(step, SOURCE, run_id, local)
            assert result.ok, result
            if isinstance(result, GoldStepResult):
                modes["local"] = str(sorted(result.write_modes.items()))
        run_data_checks(SOURCE, run_id, local)  # releases the source's run lease, as in the DAG
        t1 = time.monotonic()
        client = subprocess.Popen([sys.executable, "-c", CLIENT, str(connect.config_path), run_id, str(REPO_ROOT)],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        server.started.add(client.pid)
        stdout, stderr = client.communicate(timeout=600)
        for pid in [server.proc.pid, *server.cluster.pids()]:  # the server's workers, the executors
            _remember(pid, server.started)
        assert client.returncode == 0, stderr[-4000:]
        modes["connect"] = next(line for line in stdout.splitlines() if line.startswith("gold "))
        where = sorted(line for line in stderr.splitlines() if line.endswith((" in this process", " by a Spark job")))
        out.append({"local": _digests(local), "connect": _digests(connect), "modes": modes, "where": where,
                    "replays": {mode: _replays(cfg) for mode, cfg in (("local", local), ("connect", connect))},
                    "seconds": (t1 - t0, time.monotonic() - t1)})
    return out


@pytest.mark.parametrize("night", [1, 2])
def test_every_table_equals_local_mode(nights: list[dict[str, Any]], night: int) -> None:
    got = nights[night - 1]
    assert got["where"] == [["gold.alpha__shop__customer: 3 row change(s) replayed in this process"],
                            ["gold.alpha__shop__orders: 7 row change(s) replayed by a Spark job"]][night - 1]
    assert sorted(got["connect"]) == sorted(got["local"])
    assert any(name.startswith("gold/alpha__") for name in got["local"])
    for name, digest in got["local"].items():
        assert got["connect"][name] == digest, name
    rows = got["local"]["meta.ingested_files"].rows
    assert rows == len(NIGHTS[0]) + (len(NIGHTS[1]) if night == 2 else 0)


def test_gold_writes_the_same_way_in_both_modes(nights: list[dict[str, Any]]) -> None:
    """Night 1 writes ``customer`` (full replay); night 2 MERGEs ``customer``'s new changes into it
    (incremental, through Connect) and writes ``orders`` in full: the same write modes and replay
    kinds in both modes."""
    first, second = nights[0]["modes"], nights[1]["modes"]
    assert first["local"] == "[('overwrite', 1)]" and first["connect"] == f"gold {first['local']}"
    assert second["local"] == "[('merge', 1), ('overwrite', 1)]", second
    assert second["connect"] == f"gold {second['local']}"
    for night in nights:
        assert night["replays"]["connect"] == night["replays"]["local"]
    assert nights[0]["replays"]["connect"] == {"alpha__shop__customer": "full"}
    assert nights[1]["replays"]["connect"] == {"alpha__shop__customer": "incremental", "alpha__shop__orders": "full"}


def test_the_servers_executors_ran_on_the_cluster(server: Server, nights: list[dict[str, Any]]) -> None:
    """The server is an application of the standalone master, with cores, and its executor ran on the
    worker (the worker's folder for the application holds an executor's log of tasks it ran)."""
    apps = server.cluster.state().get("activeapps", [])
    assert len(apps) == 1 and apps[0]["state"] == "RUNNING" and int(apps[0]["cores"]) == 2, apps
    app_id = str(apps[0]["id"])
    assert server.cluster.workers_running(app_id) == [0]
    logs = (server.cluster.work_dir / "worker0" / app_id).glob("*/stderr")
    assert any("Running task" in p.read_text(errors="replace") for p in logs)


def test_no_process_is_left(server: Server, nights: list[dict[str, Any]]) -> None:
    """The server's JVM, its executors and their Python workers, the clients and the cluster: all
    gone once the server and the cluster stop."""
    server.proc.send_signal(signal.SIGTERM)
    server.proc.wait(timeout=120)
    server.cluster.stop()
    deadline = time.monotonic() + 30
    alive = [p for p in server.started if psutil.pid_exists(p)]
    while alive and time.monotonic() < deadline:
        time.sleep(0.5)
        alive = [p for p in server.started if psutil.pid_exists(p) and psutil.Process(p).status() != "zombie"]
    assert not alive, alive


def test_connect_mode_and_remote_in_the_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = _config(tmp_path, tmp_path / "archive", mode="connect", remote="sc://127.0.0.1:15999")
    assert (cfg.spark.mode, cfg.spark.remote) == ("connect", "sc://127.0.0.1:15999")
    monkeypatch.setenv("BINLAKE_SPARK_REMOTE", "sc://127.0.0.1:16000")
    assert load_config(cfg.config_path).spark.remote == "sc://127.0.0.1:16000"
    assert BinlakeConfig().spark.mode == "local"  # the embedded session stays the default


TYPED_DDL = "id INT, name STRING, at TIMESTAMP, day DATE, price DECIMAL(10,2), raw BINARY, ok BOOLEAN"


def test_mapinarrow_gives_the_values_the_rdd_gave(spark: Any) -> None:
    """The replacements of ``rdd.mapPartitions`` and ``createDataFrame(rdd)`` (local mode, where both
    exist): the partition function sees the same Python values (naive local datetimes, bytes),
    and the typed rows it yields come back as the same table."""
    import datetime as dt
    from decimal import Decimal

    from spark_jobs.session import map_partitions_tagged, run_on_executors, tagged_frame, tagged_values

    rows = [(1, "a", dt.datetime(2024, 3, 31, 1, 30, tzinfo=dt.UTC), dt.date(2024, 3, 31), Decimal("1.50"),
             b"\x00\xff", True), (2, None, None, None, None, None, None)]
    df = spark.createDataFrame(rows, TYPED_DDL).repartition(1)

    def seen(part: Any) -> Iterator[tuple[str, Any]]:
        for r in part:
            yield "row", tuple(r)
            yield "types", tuple(type(v).__name__ for v in r)

    old = sorted(df.rdd.mapPartitions(seen).collect(), key=repr)
    tagged = map_partitions_tagged(df, seen)
    assert sorted(tagged_values(tagged, "row", "types"), key=repr) == old
    typed = tagged_frame(spark, tagged, ("row",), TYPED_DDL)
    assert typed.schema == df.schema
    assert sorted(typed.collect(), key=repr) == sorted(df.collect(), key=repr)
    assert run_on_executors(spark, lambda x: x * 2, [3, 1, 2]) == [6, 2, 4]
