"""Commit campaign: W writers of both engines x C commits each to ONE Delta table on S3, no lock.

Every writer is its own process: a Spark driver (``local[1]``, binlake's session settings) or a
delta-rs writer. Each appends C commits of R distinct rows ``(writer, commit, i)``, tied to the run
as binlake's jobs tie theirs (a Delta ``txn`` per writer and commit: a retried commit that landed
is skipped, never written twice), with a random stall before each commit. All of them talk to the
loopback S3 server (moto, conditional writes atomic: ``binlake_testing.moto_atomic``) through the
fault proxy (``binlake_testing.fault_proxy``): 503 before forwarding, 500 after a write landed,
requests held before forwarding (log PUTs, which also widens a check-then-PUT window). No
binlake commit lock is taken: the commit protocol alone must keep every commit.

Then, read straight from the server: the data commits in ``_delta_log`` (commits with ``add``
actions), each writer's rows, and the table against a serial run of the same commits (delta-rs,
one after the other, no faults). ``--spark-log-store stock`` uses Delta's
``S3SingleDriverLogStore`` (check, then an unconditional PUT) and delta-rs with
``AWS_S3_ALLOW_UNSAFE_RENAME``, the settings before issue 43: the reproduction.

    .venv/bin/python bench/commit_campaign.py --spark-writers 3 --delta-rs-writers 5 --commits 6
    .venv/bin/python bench/commit_campaign.py --spark-log-store stock      # the reproduction
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
STOCK_LOG_STORE = "io.delta.storage.S3SingleDriverLogStore"
LOG_PUT = r"_delta_log/\d{20}\.json"
BUCKET = "commit-campaign"


@dataclass(frozen=True)
class Faults:
    """What the proxy does to requests (fractions of requests; seconds)."""

    fail_rate: float = 0.03
    fail_after_rate: float = 0.03
    delay_rate: float = 0.3
    delay_seconds: tuple[float, float] = (0.2, 1.5)
    stall_max: float = 1.0
    seed: int = 43


@dataclass
class CampaignResult:
    """What the log and the table hold after the campaign."""

    writers: dict[str, str]
    commits_each: int
    rows_each: int
    spark_log_store: str
    data_commits: int
    expected_commits: int
    lost: list[str]
    duplicated: list[str]
    rows_equal_serial: bool
    writer_errors: dict[str, str]
    faults: dict[str, int] = field(default_factory=dict)
    conditional_puts: int = 0
    refused_puts: int = 0
    writer_retries: dict[str, int] = field(default_factory=dict)
    wall_seconds: float = 0.0
    #: from the start until every writer was ready (JVMs up), and the commits after the go
    ready_seconds: float = 0.0
    commit_seconds: float = 0.0

    @property
    def exact(self) -> bool:
        return (self.data_commits == self.expected_commits and not self.lost and not self.duplicated
                and self.rows_equal_serial and not self.writer_errors)


def rows_of(writer: str, commit: int, rows_each: int) -> dict[str, list[Any]]:
    return {"writer": [writer] * rows_each, "commit": [commit] * rows_each, "i": list(range(rows_each))}


def _delta_rs_options(endpoint: str, *, unsafe: bool = False) -> dict[str, str]:
    options = {"AWS_ENDPOINT_URL": endpoint, "AWS_ALLOW_HTTP": "true", "AWS_REGION": "us-east-1",
               "AWS_ACCESS_KEY_ID": "binlake-test", "AWS_SECRET_ACCESS_KEY": "binlake-test-secret",
               "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "false"}
    if unsafe:
        options["AWS_S3_ALLOW_UNSAFE_RENAME"] = "true"
    return options


def _schema() -> Any:
    import pyarrow as pa

    return pa.schema([("writer", pa.string()), ("commit", pa.int64()), ("i", pa.int64())])


# ----------------------------------------------------------------------------- the writers


def _wait_for_go(go: Path) -> None:
    print("ready", flush=True)
    while not go.exists():
        time.sleep(0.05)


def _delta_rs_writer(args: argparse.Namespace) -> None:
    import pyarrow as pa
    from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake

    options = _delta_rs_options(args.endpoint, unsafe=args.spark_log_store == "stock")
    uri = "s3://" + args.uri.split("://", 1)[1]
    rnd = random.Random(args.seed)
    _wait_for_go(Path(args.go))
    for commit in range(args.commits):
        time.sleep(rnd.uniform(0, args.stall_max))
        data = pa.Table.from_pydict(rows_of(args.name, commit, args.rows), schema=_schema())
        for attempt in range(8):
            try:
                done = DeltaTable(uri, storage_options=options).transaction_version(args.name)
                if done is None or done < commit:
                    write_deltalake(uri, data, mode="append", storage_options=options,
                                    commit_properties=CommitProperties(
                                        app_transactions=[Transaction(args.name, commit)]))
                break
            except Exception as exc:  # noqa: BLE001 - a conflict or a fault: retried, reported if it stays
                print(f"retry {commit} {attempt}: {type(exc).__name__}: {str(exc)[:200]}", file=sys.stderr, flush=True)
                time.sleep(rnd.uniform(0.2, 1.0))
        else:
            raise SystemExit(f"{args.name}: commit {commit} failed 8 times")


def _spark_writer(args: argparse.Namespace) -> None:
    from binlake.config import REPO_ROOT, config_from_dict
    from spark_jobs.session import build_spark_session, stop_session

    extra = {"spark.databricks.delta.delta.log.cacheSize": "4", "spark.sql.ui.retainedExecutions": "1",
             # commits are small: S3A buffers them in memory, not in /tmp (which a shared machine may clean)
             "spark.hadoop.fs.s3a.fast.upload.buffer": "array",
             # a short-lived driver: the C1 compiler and the serial collector about halve its CPU
             # (docs/operations.md); the commit protocol does not depend on either
             "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"}
    if args.spark_log_store == "stock":
        extra.update({f"spark.delta.logStore.{s}.impl": STOCK_LOG_STORE for s in ("s3a", "s3", "s3n")})
    cfg = config_from_dict({
        "pipeline": {"warehouse": str(Path(args.go).parent / "wh"), "state_dir": str(Path(args.go).parent / args.name),
                     "jars_dir": os.environ.get("BINLAKE_JARS_DIR", str(REPO_ROOT / ".jars"))},
        "sources": [{"name": "x", "uri": str(REPO_ROOT / "tests/fixtures/mariadb-10.11")}],
        "s3": {"endpoint_url": args.endpoint, "path_style_access": True, "max_attempts": 5},
        "spark": {"master": "local[1]", "shuffle_partitions": 1, "ui_enabled": False, "driver_memory": "512m",
                  "conf": extra},
    }, base=REPO_ROOT, env={})
    spark = build_spark_session(cfg, f"campaign-{args.name}", ui=False)
    spark.read.format("delta").load(args.uri).count()  # warm: the JVM, S3A, Delta's classes
    rnd = random.Random(args.seed)
    _wait_for_go(Path(args.go))
    for commit in range(args.commits):
        time.sleep(rnd.uniform(0, args.stall_max))
        df = spark.createDataFrame(list(zip(*rows_of(args.name, commit, args.rows).values(), strict=True)),
                                   "writer string, commit long, i long")
        for attempt in range(8):
            try:
                (df.write.format("delta").mode("append").option("txnAppId", args.name)
                 .option("txnVersion", str(commit)).save(args.uri))
                break
            except Exception as exc:  # noqa: BLE001 - retried (the txn skips a commit that landed)
                print(f"retry {commit} {attempt}: {type(exc).__name__}: {str(exc)[:300]}", file=sys.stderr, flush=True)
                time.sleep(rnd.uniform(0.2, 1.0))
        else:
            raise SystemExit(f"{args.name}: commit {commit} failed 8 times")
    stop_session(spark)


# ----------------------------------------------------------------------------- the campaign


def _start_writers(engines: dict[str, str], *, endpoint: str, uri: str, go: Path, commits: int, rows: int,
                   faults: Faults, spark_log_store: str) -> dict[str, subprocess.Popen[str]]:
    procs = {}
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for n, (name, engine) in enumerate(engines.items()):
        cmd = [sys.executable, str(Path(__file__).resolve()), "writer", "--engine", engine, "--name", name,
               "--endpoint", endpoint, "--uri", uri, "--go", str(go), "--commits", str(commits), "--rows", str(rows),
               "--stall-max", str(faults.stall_max), "--seed", str(faults.seed * 100 + n),
               "--spark-log-store", spark_log_store]
        with open(go.parent / f"{name}.stderr", "w") as err:  # a file: a JVM's log never fills a pipe
            procs[name] = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True, env=env)
    return procs


def _await_ready(procs: dict[str, subprocess.Popen[str]], timeout: float, logs: Path) -> None:
    deadline = time.monotonic() + timeout
    for name, proc in procs.items():
        assert proc.stdout is not None
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if line.strip() == "ready":
                break
            if not line and proc.poll() is not None:
                lines = (logs / f"{name}.stderr").read_text().splitlines()
                why = "\n".join(ln for ln in lines if "Exception" in ln or "Error" in ln)[-3000:]
                raise RuntimeError(f"writer {name} exited before it was ready (exit {proc.returncode}): {why}")
        else:
            raise TimeoutError(f"writer {name} not ready after {timeout} s")


def _log_commits(client: Any, prefix: str) -> list[list[dict[str, Any]]]:
    """Every commit file's actions, in version order, read straight from the server."""
    import re

    keys = []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix + "/_delta_log/"):
        keys += [o["Key"] for o in page.get("Contents", []) if re.search(r"/\d{20}\.json$", o["Key"])]
    commits = []
    for key in sorted(keys):
        body = client.get_object(Bucket=BUCKET, Key=key)["Body"].read().decode()
        commits.append([json.loads(line) for line in body.splitlines() if line.strip()])
    return commits


def _table_rows(endpoint: str, uri: str) -> list[tuple[str, int, int]]:
    import pyarrow as pa
    from deltalake import DeltaTable

    table = pa.table(DeltaTable(uri, storage_options=_delta_rs_options(endpoint)).to_pyarrow_table())
    return sorted(zip(*(table.column(c).to_pylist() for c in ("writer", "commit", "i")), strict=True))


def _serial_rows(endpoint: str, engines: dict[str, str], commits: int, rows: int) -> list[tuple[str, int, int]]:
    """The same commits, one after the other, by one delta-rs writer, no faults: the reference."""
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    uri = f"s3://{BUCKET}/serial"
    options = _delta_rs_options(endpoint)
    DeltaTable.create(uri, schema=_schema(), storage_options=options)
    for name in engines:
        for commit in range(commits):
            write_deltalake(uri, pa.Table.from_pydict(rows_of(name, commit, rows), schema=_schema()), mode="append",
                            storage_options=options)
    return _table_rows(endpoint, uri)


def _judge(server: Any, engines: dict[str, str], commits: int, rows: int) -> tuple[int, list[str], list[str], bool]:
    """Data commits in the log, (writer, commit) pairs lost / duplicated, and table == serial run."""
    log = _log_commits(server.client(), "table")
    data_commits = sum(1 for actions in log if any("add" in a for a in actions))
    got = _table_rows(server.endpoint_url, f"s3://{BUCKET}/table")
    pairs = collections.Counter((w, c) for w, c, _ in got)
    expected = {(w, c) for w in engines for c in range(commits)}
    lost = sorted(f"{w}#{c}" for w, c in expected if pairs[(w, c)] == 0)
    duplicated = sorted(f"{w}#{c}" for (w, c), n in pairs.items() if n != rows and (w, c) in expected and n)
    serial = _serial_rows(server.endpoint_url, engines, commits, rows)
    return data_commits, lost, duplicated, got == serial


def _fault_counts(proxy: Any) -> tuple[dict[str, int], int, int]:
    faults = collections.Counter(r.fault for r in proxy.requests if r.fault)
    log_puts = [r for r in proxy.requests if r.method == "PUT" and "/_delta_log/" in r.path and r.path.endswith(".json")]
    return dict(faults), sum(1 for r in log_puts if r.condition == "*"), sum(1 for r in log_puts if r.status == 412)


def run_campaign(*, spark_writers: int, delta_rs_writers: int, commits: int, rows: int = 3,
                 faults: Faults = Faults(), spark_log_store: str = "binlake", ready_timeout: float = 600.0,
                 run_timeout: float = 900.0) -> CampaignResult:
    """Run one campaign against a fresh loopback S3 server (a process) and judge what it left."""
    from deltalake import DeltaTable

    from binlake_testing.fault_proxy import CutBodyProxy
    from binlake_testing.s3server import DUMMY_AWS_ENV, S3Server

    os.environ.update({k: os.environ.get(k, v) for k, v in DUMMY_AWS_ENV.items()})
    engines = {f"s{n}": "spark" for n in range(spark_writers)} | {f"d{n}": "delta-rs" for n in range(delta_rs_writers)}
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="binlake-campaign-") as tmp, S3Server(mode="process") as server:
        server.client().create_bucket(Bucket=BUCKET)
        DeltaTable.create(f"s3://{BUCKET}/table", schema=_schema(), storage_options=_delta_rs_options(server.endpoint_url))
        proxy = CutBodyProxy(upstream=server.endpoint_url, cut_bodies=0, fail_rate=faults.fail_rate,
                             fail_after_rate=faults.fail_after_rate, delay_rate=faults.delay_rate,
                             delay_seconds=faults.delay_seconds, delay_paths=LOG_PUT, seed=faults.seed)
        with proxy:
            go = Path(tmp) / "go"
            procs = _start_writers(engines, endpoint=proxy.endpoint_url, uri=f"s3a://{BUCKET}/table", go=go,
                                   commits=commits, rows=rows, faults=faults, spark_log_store=spark_log_store)
            try:
                _await_ready(procs, ready_timeout, Path(tmp))
                ready = time.monotonic()
                go.touch()
                errors = {}
                for name, proc in procs.items():
                    proc.communicate(timeout=run_timeout)
                    if proc.returncode != 0:
                        errors[name] = (Path(tmp) / f"{name}.stderr").read_text()[-2000:]
                retries = {name: (Path(tmp) / f"{name}.stderr").read_text().count("retry ") for name in procs}
                committed = time.monotonic()
            finally:
                for proc in procs.values():
                    if proc.poll() is None:
                        proc.kill()
                        proc.wait()
        data_commits, lost, duplicated, equal = _judge(server, engines, commits, rows)
        fault_counts, conditional, refused = _fault_counts(proxy)
    return CampaignResult(writers=engines, commits_each=commits, rows_each=rows, spark_log_store=spark_log_store,
                          data_commits=data_commits, expected_commits=len(engines) * commits, lost=lost,
                          duplicated=duplicated, rows_equal_serial=equal, writer_errors=errors, faults=fault_counts,
                          conditional_puts=conditional, refused_puts=refused, writer_retries=retries,
                          wall_seconds=round(time.monotonic() - began, 1), ready_seconds=round(ready - began, 1),
                          commit_seconds=round(committed - ready, 1))


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command")
    writer = sub.add_parser("writer", help="one writer process (started by the campaign)")
    for name in ("--engine", "--name", "--endpoint", "--uri", "--go", "--spark-log-store"):
        writer.add_argument(name, required=True)
    for name in ("--commits", "--rows", "--seed"):
        writer.add_argument(name, type=int, required=True)
    writer.add_argument("--stall-max", type=float, default=1.0)
    parser.add_argument("--spark-writers", type=int, default=3)
    parser.add_argument("--delta-rs-writers", type=int, default=5)
    parser.add_argument("--commits", type=int, default=6)
    parser.add_argument("--rows", type=int, default=3)
    parser.add_argument("--spark-log-store", choices=("binlake", "stock"), default="binlake")
    parser.add_argument("--fail-rate", type=float, default=Faults.fail_rate)
    parser.add_argument("--fail-after-rate", type=float, default=Faults.fail_after_rate)
    parser.add_argument("--delay-rate", type=float, default=Faults.delay_rate)
    parser.add_argument("--delay-seconds", type=float, nargs=2, default=Faults.delay_seconds, metavar=("MIN", "MAX"))
    parser.add_argument("--stall-max", type=float, default=Faults.stall_max)
    parser.add_argument("--seed", type=int, default=Faults.seed)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "writer":
        (_spark_writer if args.engine == "spark" else _delta_rs_writer)(args)
        return 0
    faults = Faults(fail_rate=args.fail_rate, fail_after_rate=args.fail_after_rate, delay_rate=args.delay_rate,
                    delay_seconds=tuple(args.delay_seconds), stall_max=args.stall_max, seed=args.seed)
    result = run_campaign(spark_writers=args.spark_writers, delta_rs_writers=args.delta_rs_writers,
                          commits=args.commits, rows=args.rows, faults=faults, spark_log_store=args.spark_log_store)
    print(json.dumps({**asdict(result), "faults_config": asdict(faults), "exact": result.exact}, indent=1))
    return 0 if result.exact else 1


if __name__ == "__main__":
    sys.exit(main())
