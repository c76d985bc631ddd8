"""A fleet of small sources through the nightly DAG under Airflow's real scheduler: what a night costs per source.

For each N in ``--sources`` (default 1,4): a loopback S3 server (moto, its own process), N sources
each holding a generated chain of about ``--size`` bytes (``binlake_testing.synthetic``, OLTP),
the warehouse on ``s3a://``, Airflow's scheduler, dag-processor and api-server (LocalExecutor,
parallelism 2, SQLite), ``[spark] mode = "local"`` (``--mode local``: every Spark task starts its own JVM)
or ``"connect"`` (``--mode connect``: the script starts one ``binlake serve --no-thrift --connect`` with
``--master``, the tasks are its thin clients; its JVM and Python workers count in the tree). Three nightly
runs: night 1 ingests every file but each source's two newest, night 2 finds nothing new, night 3
finds one small new file per source (:data:`NIGHTS`). Per night it prints the wall time, the
CPU-seconds of the whole process tree (the S3 server, the Airflow services, every task process and
its JVM) and how they split (:func:`process_kind`), the task-seconds per
step (Airflow's task instances: end - start, summed over sources), the Delta commits the night
added (``_delta_log/*.json`` objects, per table family) and how many step instances started Spark
(their documents' ``spark`` field). Last, per night, the least-squares line CPU = fixed + per_source × N.
``--per-task K`` sets ``[pipeline] sources_per_task``: the busy sources share one task per step, K at a time.

CPU is sampled: every process of the tree is read (psutil) every ``--interval`` seconds and its last
reading counts; a process that lives shorter than the interval is missed, so the figures are a
floor. ``--repo PATH`` runs the DAGs and jobs of another checkout (e.g. ``git worktree add
/tmp/fleet-base HEAD`` before a change) with this checkout's harness.

    python bench/fleet.py --sources 1,4 [--mode local|connect] [--per-task K] [--size 256KiB] [--repo /tmp/fleet-base]
        [--json out.json]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import psutil

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.tree_cpu import TreeCpu  # noqa: E402
from binlake.config import S3Settings  # noqa: E402
from binlake_testing.airflow_services import AirflowServices  # noqa: E402
from binlake_testing.configs import s3_lake_config_lines  # noqa: E402
from binlake_testing.processes import binlake_serve  # noqa: E402
from binlake_testing.s3server import S3Server, free_port  # noqa: E402
from binlake_testing.synthetic import SyntheticConfig, generate  # noqa: E402

BUCKET = "binlake-fleet"
DAG = "binlake_nightly"
STEPS = ("discover", "decode", "reconcile", "gold", "data_checks", "summary")


@dataclass
class Night:
    sources: int
    night: int
    state: str
    wall: float
    cpu: float
    task_seconds: dict[str, float] = field(default_factory=dict)
    commits: dict[str, int] = field(default_factory=dict)
    spark_started: dict[str, int] = field(default_factory=dict)
    cpu_by_kind: dict[str, float] = field(default_factory=dict)


#: the parts of the tree a night's CPU is split into (:func:`process_kind`)
KINDS = ("tasks", "Spark server", "Airflow services", "S3 server", "other")


def process_kind(proc: psutil.Process) -> str:
    """Which part of the fleet ``proc`` belongs to, from its and its ancestors' command lines
    (Airflow titles its processes with ``setproctitle``): ``tasks`` (an Airflow task's supervisor
    and runner and what they start, their JVM in local mode), ``Spark server`` (``binlake serve``,
    its JVM and Python workers), ``Airflow services`` (scheduler, dag-processor, api-server, an
    idle executor worker), ``S3 server`` (moto) or ``other``."""
    titles = []
    for p in (proc, *proc.parents()):
        try:
            titles.append(" ".join(p.cmdline()))
        except psutil.Error:
            continue
    for title in titles:
        if title.startswith("airflow worker -- ") and "<idle>" not in title:
            return "tasks"  # the executor's worker while it supervises a task, the task runner
        if " serve " in f" {title} " and "binlake" in title:
            return "Spark server"
        if "moto" in title:
            return "S3 server"
    if any(t.startswith("airflow") or "airflow " in t for t in titles):
        return "Airflow services"
    return "other"


def _seconds(start: str | None, end: str | None) -> float:
    if not start or not end:
        return 0.0
    return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()


def _commits(client: Any) -> Counter[str]:
    """Delta commit files per table (``warehouse/<db>/<table>``; gold tables counted as ``gold.*``)."""
    out: Counter[str] = Counter()
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix="warehouse/"):
        for obj in page.get("Contents", []):
            key = obj["Key"]
            if "/_delta_log/" in key and key.endswith(".json") and "/_delta_log/_" not in key:
                parts = key.split("/")
                out["gold.*" if parts[1] == "gold" else f"{parts[1]}.{parts[2]}"] += 1
    return out


#: night 1: every file but the two newest of each source; night 2: nothing new; night 3: one small
#: new file per source (the next of the chain; the newest stays away, so the chain is still awaiting
#: its successor, as a live archive always is): the night issue 36's per-source target is about
NIGHTS = (1, 2, 3)
HELD = "held/"


def _hold_back(client: Any, truth: dict[str, Any]) -> list[str]:
    """Move each source's two newest files under :data:`HELD`; the keys night 3 brings back (the
    older of the two)."""
    back = []
    prefix = truth["dest"].removeprefix(f"s3://{BUCKET}/").rstrip("/") + "/"
    for source in truth["sources"].values():
        files = [f for f in source["files"] if f["present"]]
        for i, f in enumerate(files[-2:]):
            key = prefix + f["object"]
            client.copy_object(Bucket=BUCKET, Key=HELD + key, CopySource={"Bucket": BUCKET, "Key": key})
            client.delete_object(Bucket=BUCKET, Key=key)
            if i == 0:
                back.append(key)
    return back


def _release(client: Any, keys: list[str]) -> None:
    for key in keys:
        client.copy_object(Bucket=BUCKET, Key=key, CopySource={"Bucket": BUCKET, "Key": HELD + key})


def _write_config(path: Path, endpoint: str, sources: list[str], master: str, mode: str = "local",
                  remote: str = "sc://127.0.0.1:15002", per_task: int = 1) -> None:
    lines = s3_lake_config_lines(bucket=BUCKET, state_dir=str(path.parent / "state"), endpoint=endpoint,
                                 sources=sources)
    if per_task != 1:  # only then: a --repo checkout from before the key still reads the file
        lines.insert(lines.index("[pipeline]") + 1, f"sources_per_task = {per_task}")
    lines += ["[spark]", f'mode = "{mode}"', f'master = "{master}"', "shuffle_partitions = 2", "ui_enabled = false",
              'driver_memory = "1g"', f'remote = "{remote}"', ""]
    path.write_text("\n".join(lines))


def _night(airflow: AirflowServices, cpu: TreeCpu, client: Any, n: int, night: int) -> Night:
    before, commits_before = cpu.snapshot(), _commits(client)
    t0 = time.monotonic()
    run_id = airflow.trigger(DAG)
    state = airflow.wait_for_run(DAG, run_id, timeout=3600)
    wall = time.monotonic() - t0
    after = cpu.snapshot()
    used, by_kind = TreeCpu.between(before, after), cpu.between_by_kind(before, after)
    tis = airflow.task_instances(DAG, run_id)
    per_step: dict[str, float] = {}
    spark: dict[str, int] = {}
    for ti in tis:
        step = ti.task_id.rsplit(".", 1)[-1]
        per_step[step] = per_step.get(step, 0.0) + _seconds(ti.start_date, ti.end_date)
        if step in ("decode", "reconcile", "gold") and ti.state == "success":
            docs = airflow.xcom(DAG, run_id, ti.task_id, ti.map_index) or []
            for doc in docs if isinstance(docs, list) else [docs]:  # one per source of the task's batch
                spark[step] = spark.get(step, 0) + int(bool(doc.get("spark", True)))
    added = _commits(client) - commits_before
    return Night(n, night, state, round(wall, 1), round(used, 1), {k: round(v, 1) for k, v in per_step.items()},
                 dict(sorted(added.items())), spark, {k: round(by_kind.get(k, 0.0), 1) for k in KINDS})


def _connect_server(stack: contextlib.ExitStack, config: Path, endpoint: str, sources: list[str],
                    master: str) -> str:
    """``binlake serve --no-thrift --connect`` (its own config: the same lake, local mode, ``master``),
    stopped when ``stack`` closes; the ``sc://`` address the tasks' config names."""
    port = free_port()
    _write_config(config.with_name("serve.toml"), endpoint, sources, master)
    args = ["--config", str(config.with_name("serve.toml")), "--no-thrift", "--connect", "--connect-port", str(port)]
    stack.enter_context(binlake_serve(args, cwd=config.parent, wait_seconds=300))
    return f"sc://127.0.0.1:{port}"


def run_fleet(n: int, *, repo: Path, size: int, master: str, interval: float, mode: str = "local",
              per_task: int = 1, s3_log: Path | None = None) -> list[Night]:
    """The :data:`NIGHTS` of ``n`` sources; every process started here is stopped before returning.
    ``s3_log``: the S3 server's request log goes to ``<s3_log>/s3-requests-<n>.log``, each night's
    requests after a ``### night <k>`` line."""
    tmp = Path(tempfile.mkdtemp(prefix=f"fleet-{n}-", dir="/tmp"))
    stack = contextlib.ExitStack()
    cpu = stack.enter_context(TreeCpu(interval, children_only=True, kind_of=process_kind))  # what it started
    log = None if s3_log is None else s3_log / f"s3-requests-{n}.log"
    server = S3Server(mode="process", request_log=None if log is None else str(log)).start()
    airflow: AirflowServices | None = None
    try:
        os.environ.update(server.env())
        os.environ["PYTHONPATH"] = str(repo)  # binlake serve (connect mode) and its workers run --repo's code too
        client = server.client()
        client.create_bucket(Bucket=BUCKET)
        truth = generate(f"s3://{BUCKET}/archive", SyntheticConfig(servers=n, bytes_per_server=size,
                                                                     max_binlog_size=max(size // 4, 16 << 10)),
                         s3_settings=S3Settings(endpoint_url=server.endpoint_url, path_style_access=True))
        sources = sorted(truth["sources"])
        held = _hold_back(client, truth)
        config = tmp / "binlake.toml"
        remote = "sc://127.0.0.1:15002"
        if mode == "connect":
            remote = _connect_server(stack, config, server.endpoint_url, sources, master)
        _write_config(config, server.endpoint_url, sources, master, mode, remote, per_task)
        venv_bin = str(Path(sys.executable).parent)
        env = {"BINLAKE_CONFIG": str(config), "PYTHONPATH": str(repo), "SPARK_LOCAL_IP": "127.0.0.1",
               "PATH": venv_bin + os.pathsep + os.environ.get("PATH", ""),
               "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable, **server.env()}
        airflow = AirflowServices(home=tmp / "airflow", dags_folder=repo / "dags", extra_env=env, parallelism=2)
        airflow.start()
        airflow.wait_for_dag(DAG)
        nights = []
        for night in NIGHTS:
            if night == 3:
                _release(client, held)
            if log is not None:
                with log.open("a", encoding="utf-8") as out:
                    out.write(f"### night {night}\n")
            nights.append(_night(airflow, cpu, client, n, night))
            print(json.dumps(nights[-1].__dict__), flush=True)
        return nights
    finally:
        if airflow is not None:
            airflow.stop()
        stack.close()
        server.stop()


def fit(points: list[tuple[int, float]]) -> tuple[float, float]:
    """Least squares ``y = fixed + per_source * n``: (fixed, per_source)."""
    if len({n for n, _ in points}) < 2:
        n, y = points[0]
        return 0.0, y / n
    mean_n = sum(n for n, _ in points) / len(points)
    mean_y = sum(y for _, y in points) / len(points)
    slope = (sum((n - mean_n) * (y - mean_y) for n, y in points)
             / sum((n - mean_n) ** 2 for n, _ in points))
    return mean_y - slope * mean_n, slope


def table(nights: list[Night]) -> str:
    steps = [s for s in STEPS if any(s in x.task_seconds for x in nights)]
    head = ["sources", "night", "state", "wall s", "CPU s", "CPU s/source",
            "CPU s: tasks / Spark server / Airflow services / S3 server", *[f"{s} task-s" for s in steps],
            "Delta commits", "steps that started Spark"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for x in nights:
        commits = sum(x.commits.values())
        started = ", ".join(f"{k} {v}" for k, v in sorted(x.spark_started.items()) if v) or "none"
        lines.append("| " + " | ".join([str(x.sources), str(x.night), x.state, f"{x.wall:.0f}", f"{x.cpu:.0f}",
                                        f"{x.cpu / x.sources:.1f}",
                                        " / ".join(f"{x.cpu_by_kind.get(k, 0):.0f}" for k in KINDS[:4]),
                                        *[f"{x.task_seconds.get(s, 0):.0f}" for s in steps],
                                        str(commits), started]) + " |")
    for night in NIGHTS:
        pts = [(x.sources, x.cpu) for x in nights if x.night == night]
        if pts:
            fixed, per = fit(pts)
            kinds = "; ".join(f"{k} {a:.1f} + {b:.1f} x N" for k in KINDS[:2]
                              for a, b in [fit([(x.sources, x.cpu_by_kind.get(k, 0.0)) for x in nights
                                                if x.night == night])])
            lines.append(f"\nnight {night}: CPU-s = {fixed:.1f} + {per:.1f} x sources (least squares over N = "
                         f"{', '.join(str(n) for n, _ in pts)}; of it {kinds})")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sources", default="1,4", help="comma-separated fleet sizes (default 1,4)")
    parser.add_argument("--size", default="256KiB", help="binlog bytes per source (default 256KiB)")
    parser.add_argument("--repo", type=Path, default=REPO, help="checkout whose dags/ and jobs run (default: this one)")
    parser.add_argument("--master", default="local[2]", help="Spark master of the sessions (connect: of the server)")
    parser.add_argument("--mode", choices=("local", "connect"), default="local",
                        help="[spark] mode: a JVM per task (local) or thin clients of one binlake serve --connect")
    parser.add_argument("--per-task", type=int, default=1, help="[pipeline] sources_per_task (default 1)")
    parser.add_argument("--interval", type=float, default=0.5, help="CPU sampling interval, seconds")
    parser.add_argument("--json", type=Path, help="also write the nights as JSON here")
    parser.add_argument("--s3-log", type=Path, help="a folder for the S3 server's request logs, one per N")
    args = parser.parse_args(argv)
    from binlake_testing.synthetic import _size

    nights: list[Night] = []
    for n in (int(x) for x in args.sources.split(",")):
        nights += run_fleet(n, repo=args.repo.resolve(), size=_size(args.size), master=args.master,
                            interval=args.interval, mode=args.mode, per_task=args.per_task,
                            s3_log=args.s3_log)
    print(f"fleet benchmark, {datetime.now():%Y-%m-%d %H:%M} UTC, code of {args.repo}, {os.cpu_count()} cores, "
          f"size {args.size} per source, Spark {args.master}, mode {args.mode}, {args.per_task} source(s) per task")
    print(table(nights))
    if args.json:
        args.json.write_text(json.dumps([x.__dict__ for x in nights], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
