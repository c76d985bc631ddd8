"""Airflow as a service for tests and demos: scheduler, dag-processor and api-server on loopback.

Why not ``dag.test()``: it runs one task at a time in the calling process, so it can never show
what parallel task instances do to shared tables (the ConcurrentAppendException of issue #10).
This starts the three real Airflow 3 services from the installed distribution with a throw-away
``AIRFLOW_HOME``: SQLite metadata DB, LocalExecutor (Airflow 3 allows it on SQLite) with
``parallelism`` task slots, the execution API at ``http://127.0.0.1:<port>/execution/`` (where task
processes report to), the repo's ``dags/`` folder, and SimpleAuthManager with "all admins" so the
REST API needs no login. Every service runs in its own process group; :meth:`stop` (also from the
context manager on errors) terminates the groups, then kills what is left.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from binlake.errors import BinlakeError
from binlake_testing.s3server import free_port

SERVICES = ("api-server", "scheduler", "dag-processor")
TERMINAL_RUN_STATES = frozenset({"success", "failed"})


class AirflowServiceError(BinlakeError, RuntimeError):
    """A service did not come up, or a REST call failed."""


@dataclass(frozen=True)
class TaskInstanceInfo:
    """One task instance of a DAG run, as the REST API reports it."""

    task_id: str
    map_index: int
    state: str | None
    start_date: str | None
    end_date: str | None
    try_number: int = 0
    rendered_map_index: str | None = None


def _airflow_bin() -> str:
    candidate = Path(sys.executable).with_name("airflow")
    return str(candidate) if candidate.exists() else "airflow"


@dataclass
class AirflowServices:
    """The three services on ``127.0.0.1:<port>``; use as a context manager or start()/stop()."""

    home: Path
    dags_folder: Path
    extra_env: dict[str, str] = field(default_factory=dict)
    parallelism: int = 2
    port: int = 0
    _procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict, init=False, repr=False)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        """The environment of every service (and of the task processes they start)."""
        env = dict(os.environ)
        env.update({
            "AIRFLOW_HOME": str(self.home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(self.dags_folder),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
            "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            "AIRFLOW__CORE__PARALLELISM": str(self.parallelism),
            "AIRFLOW__CORE__MAX_ACTIVE_TASKS_PER_DAG": str(self.parallelism),
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{self.home}/airflow.db",
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{self.base_url}/execution/",
            "AIRFLOW__API__BASE_URL": self.base_url,
            "AIRFLOW__API__HOST": "127.0.0.1",
            "AIRFLOW__API__PORT": str(self.port),
            "AIRFLOW__API__WORKERS": "1",
            "AIRFLOW__CORE__AUTH_MANAGER":
                "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
            "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "2",
            "AIRFLOW__SCHEDULER__ENABLE_HEALTH_CHECK": "False",
            # Only the runs a test triggers: unpausing a cron DAG with catchup=False would also
            # create a run for the latest interval, and max_active_runs=1 would queue ours behind it.
            "AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE": "False",
            "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(self.home / "logs"),
        })
        env.update(self.extra_env)
        return env

    # ------------------------------------------------------------------ lifecycle

    def start(self, timeout: float = 300.0) -> AirflowServices:
        self.home.mkdir(parents=True, exist_ok=True)
        self.port = self.port or free_port()
        env = self.env()
        subprocess.run([_airflow_bin(), "db", "migrate"], env=env, check=True, capture_output=True,
                       timeout=timeout)
        try:
            for name in SERVICES:
                args = [_airflow_bin(), name]
                if name == "api-server":
                    args += ["--host", "127.0.0.1", "--port", str(self.port), "--workers", "1"]
                log = (self.home / f"{name}.out").open("wb")
                self._procs[name] = subprocess.Popen(args, env=env, stdout=log, stderr=subprocess.STDOUT,
                                                     start_new_session=True)
            self._wait_healthy(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_healthy(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name, proc in self._procs.items():
                if proc.poll() is not None:
                    raise AirflowServiceError(f"airflow {name} exited with {proc.returncode}: "
                                              f"{self.service_log(name)[-3000:]}")
            try:
                self.get("/api/v2/monitor/health")
                return
            except (OSError, AirflowServiceError):
                time.sleep(0.5)
        raise AirflowServiceError(f"airflow api-server not healthy after {timeout:.0f}s: "
                                  f"{self.service_log('api-server')[-3000:]}")

    def stop(self, grace: float = 20.0) -> None:
        """SIGTERM every service's process group, then SIGKILL what is left, task processes included.

        Task runners start their own sessions (not in the scheduler's group), so the descendants
        of every service are collected first (psutil, an Airflow dependency) and killed by group too.
        """
        import psutil

        groups: set[int] = set()
        for proc in self._procs.values():
            groups.add(proc.pid)
            try:
                for child in psutil.Process(proc.pid).children(recursive=True):
                    groups.add(os.getpgid(child.pid))
            except (psutil.Error, ProcessLookupError):
                pass
        for pgid in groups:
            _signal_group(pgid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for proc in self._procs.values():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        for pgid in groups:
            _signal_group(pgid, signal.SIGKILL)
        for proc in self._procs.values():
            proc.wait(timeout=10)
        self._procs.clear()

    def pids(self) -> list[int]:
        """The services' process ids (task runners, spark-submit drivers are their descendants)."""
        return [p.pid for p in self._procs.values() if p.poll() is None]

    def __enter__(self) -> AirflowServices:  # noqa: PYI034 - start() returns self
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def service_log(self, name: str) -> str:
        path = self.home / f"{name}.out"
        return path.read_text(errors="replace") if path.exists() else ""

    # ------------------------------------------------------------------ REST

    def request(self, method: str, path: str, body: Any = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base_url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json", "Accept": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=60) as resp:
                text = resp.read().decode()
        except urllib.error.HTTPError as exc:
            raise AirflowServiceError(f"{method} {path}: HTTP {exc.code}: {exc.read().decode(errors='replace')}") \
                from exc
        return json.loads(text) if text else None

    def get(self, path: str) -> Any:
        return self.request("GET", path)

    def wait_for_dag(self, dag_id: str, timeout: float = 300.0) -> None:
        """Until the dag-processor has parsed ``dag_id``; fails early on import errors."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            errors = self.get("/api/v2/importErrors").get("import_errors", [])
            if errors:
                raise AirflowServiceError(f"DAG import errors: {errors}")
            try:
                self.get(f"/api/v2/dags/{dag_id}")
                return
            except AirflowServiceError:
                time.sleep(0.5)
        raise AirflowServiceError(f"DAG {dag_id} not parsed after {timeout:.0f}s: "
                                  f"{self.service_log('dag-processor')[-3000:]}")

    def trigger(self, dag_id: str, conf: dict[str, Any] | None = None) -> str:
        """Unpause ``dag_id`` and create a run through ``POST /api/v2/dags/{dag_id}/dagRuns``."""
        self.request("PATCH", f"/api/v2/dags/{dag_id}", {"is_paused": False})
        run = self.request("POST", f"/api/v2/dags/{dag_id}/dagRuns", {"logical_date": None, "conf": conf or {}})
        return str(run["dag_run_id"])

    def wait_for_run(self, dag_id: str, run_id: str, timeout: float = 1800.0) -> str:
        """Poll the run until it is ``success`` or ``failed``; returns that state."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            state = self.get(f"/api/v2/dags/{dag_id}/dagRuns/{run_id}")["state"]
            if state in TERMINAL_RUN_STATES:
                return str(state)
            time.sleep(1.0)  # one small REST call: a run's end is seen within a second
        raise AirflowServiceError(f"run {dag_id}/{run_id} not finished after {timeout:.0f}s")

    def task_instances(self, dag_id: str, run_id: str) -> list[TaskInstanceInfo]:
        """Every task instance of the run, page by page: the API returns at most ``[api]
        maximum_page_limit`` (100 by default) per request, whatever ``limit`` asks (a 32-source night
        has 162)."""
        out: list[TaskInstanceInfo] = []
        while True:
            doc = self.get(f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances?limit=100&offset={len(out)}"
                           "&order_by=id")
            page = doc["task_instances"]
            out += [TaskInstanceInfo(t["task_id"], int(t["map_index"]), t.get("state"), t.get("start_date"),
                                     t.get("end_date"), int(t.get("try_number") or 0),
                                     t.get("rendered_map_index")) for t in page]
            if not page or len(out) >= int(doc.get("total_entries", len(out))):
                return out

    def xcom(self, dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> Any:
        doc = self.get(f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/xcomEntries/"
                       f"return_value?map_index={map_index}&deserialize=true")
        return doc.get("value")

    def task_log(self, dag_id: str, run_id: str, task_id: str, map_index: int = -1, try_number: int = 1) -> str:
        """The task's log as text (from the log files of this AIRFLOW_HOME)."""
        folder = self.home / "logs" / f"dag_id={dag_id}" / f"run_id={run_id}" / f"task_id={task_id}"
        if map_index >= 0:
            folder = folder / f"map_index={map_index}"
        return "\n".join(p.read_text(errors="replace") for p in sorted(folder.glob(f"attempt={try_number}*.log")))


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
