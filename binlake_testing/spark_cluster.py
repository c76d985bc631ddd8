"""A real Spark standalone cluster on loopback: one master and N workers from the installed pyspark.

Why: ``local[*]`` runs executors inside the driver JVM, so it cannot show what a cluster changes
(code and jars shipped to other JVMs, Python workers per executor, storage reached from the
executors, a worker lost mid-job). This starts ``spark-class org.apache.spark.deploy.master.Master``
and ``...worker.Worker`` from ``pyspark``'s own distribution, bound to 127.0.0.1 on free ports,
each worker with ``cores`` cores and ``memory`` of memory, every process in its own process group
(so :meth:`kill_worker` can SIGKILL one worker with its executors, and :meth:`stop` leaves
nothing behind). :func:`package_zip` builds the ``--py-files`` archive of the repo's packages.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from binlake.errors import BinlakeError
from binlake_testing.s3server import free_port

PACKAGES = ("binlake", "binlog_parser", "spark_jobs")


class SparkClusterError(BinlakeError, RuntimeError):
    """The master or a worker did not come up."""


def spark_home() -> Path:
    """The Spark distribution bundled with the installed pyspark."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def package_zip(repo_root: Path, dest: Path) -> Path:
    """A zip of the repo's Python packages for ``--py-files`` / ``spark.submit.pyFiles``."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as zf:
        for package in PACKAGES:
            for path in sorted((repo_root / package).rglob("*.py")):
                zf.write(path, path.relative_to(repo_root).as_posix())
    return dest


@dataclass
class SparkStandaloneCluster:
    """Master + ``workers`` workers on 127.0.0.1; use as a context manager or start()/stop()."""

    work_dir: Path
    workers: int = 2
    cores: int = 1
    memory: str = "1g"
    extra_env: dict[str, str] = field(default_factory=dict)
    master_port: int = 0
    master_ui_port: int = 0
    _master: subprocess.Popen[bytes] | None = field(default=None, init=False, repr=False)
    _workers: list[subprocess.Popen[bytes]] = field(default_factory=list, init=False, repr=False)

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.master_port}"

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update({"SPARK_HOME": str(spark_home()), "SPARK_LOCAL_IP": "127.0.0.1",
                    "SPARK_LOCAL_HOSTNAME": "127.0.0.1", "SPARK_MASTER_HOST": "127.0.0.1",
                    "PYSPARK_PYTHON": sys.executable, "SPARK_NO_DAEMONIZE": "1",
                    "SPARK_LOG_DIR": str(self.work_dir / "logs")})
        env.update(self.extra_env)
        return env

    def _spawn(self, name: str, args: list[str]) -> subprocess.Popen[bytes]:
        log = (self.work_dir / f"{name}.out").open("wb")
        return subprocess.Popen([str(spark_home() / "bin" / "spark-class"), *args], env=self.env(), stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)

    def start(self, timeout: float = 180.0) -> SparkStandaloneCluster:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.master_port = self.master_port or free_port()
        self.master_ui_port = self.master_ui_port or free_port()
        try:
            self._master = self._spawn("master", [
                "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(self.master_port),
                "--webui-port", str(self.master_ui_port)])
            for i in range(self.workers):
                self.add_worker(i)
            self.wait_for_workers(self.workers, timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def add_worker(self, index: int) -> None:
        """Start worker ``index`` (a new one, or a replacement for a killed one)."""
        folder = self.work_dir / f"worker{index}"
        folder.mkdir(parents=True, exist_ok=True)
        self._workers.append(self._spawn(f"worker{index}", [
            "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--port", str(free_port()),
            "--webui-port", str(free_port()), "--cores", str(self.cores), "--memory", self.memory,
            "--work-dir", str(folder), self.master_url]))

    def state(self) -> dict[str, Any]:
        """The master's JSON status (``/json/``): workers, applications."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.master_ui_port}/json/", timeout=10) as resp:
            return dict(json.loads(resp.read()))

    def alive_workers(self) -> int:
        return sum(1 for w in self.state().get("workers", []) if w.get("state") == "ALIVE")

    def wait_for_workers(self, n: int, timeout: float = 180.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._master is not None and self._master.poll() is not None:
                raise SparkClusterError(f"spark master exited: {self.log('master')[-2000:]}")
            try:
                if self.alive_workers() >= n:
                    return
            except (OSError, ValueError):  # not listening yet, or (starting) an empty answer
                pass
            time.sleep(0.25)
        raise SparkClusterError(f"{n} spark worker(s) not registered after {timeout:.0f}s: "
                                f"{self.log('worker0')[-2000:]}")

    def pids(self) -> list[int]:
        """The master's and the workers' process ids (their executors are their children)."""
        return [p.pid for p in [self._master, *self._workers] if p is not None and p.poll() is None]

    def wait_for_running_app(self, name: str, timeout: float = 600.0) -> str:
        """Until an application called ``name`` runs with at least one executor; returns its id."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for app in self.state().get("activeapps", []):
                if app.get("name") == name and app.get("state") == "RUNNING" and int(app.get("cores", 0)) > 0:
                    return str(app["id"])
            time.sleep(0.5)
        raise SparkClusterError(f"no running application {name!r} after {timeout:.0f}s")

    def wait_for_running_task(self, name: str, timeout: float = 600.0) -> tuple[str, int]:
        """Until an executor of an application called ``name`` runs a task: (app id, worker index)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for app in self.state().get("activeapps", []):
                if app.get("name") != name:
                    continue
                for i in self.workers_running(str(app["id"])):
                    logs = (self.work_dir / f"worker{i}" / str(app["id"])).glob("*/stderr")
                    if any("Running task" in p.read_text(errors="replace") for p in logs):
                        return str(app["id"]), i
            time.sleep(0.5)
        raise SparkClusterError(f"no task of an application {name!r} running after {timeout:.0f}s")

    def wait_for_app_end(self, app_id: str, timeout: float = 600.0) -> None:
        """Until the master lists ``app_id`` among the completed applications."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(a.get("id") == app_id for a in self.state().get("completedapps", [])):
                return
            time.sleep(0.5)
        raise SparkClusterError(f"application {app_id} still running after {timeout:.0f}s")

    def workers_running(self, app_id: str) -> list[int]:
        """Indexes of the workers that have launched an executor of ``app_id`` (its work dir exists)."""
        return [i for i in range(len(self._workers)) if (self.work_dir / f"worker{i}" / app_id).is_dir()]

    def kill_worker(self, index: int) -> None:
        """SIGKILL worker ``index`` and its executors (its whole process group)."""
        proc = self._workers[index]
        _signal_group(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)

    def stop(self, grace: float = 15.0) -> None:
        procs = [p for p in [*self._workers, self._master] if p is not None]
        for proc in procs:
            if proc.poll() is None:
                _signal_group(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for proc in procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            _signal_group(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        self._workers.clear()
        self._master = None

    def log(self, name: str) -> str:
        path = self.work_dir / f"{name}.out"
        return path.read_text(errors="replace") if path.exists() else ""

    def __enter__(self) -> SparkStandaloneCluster:  # noqa: PYI034 - start() returns self
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
