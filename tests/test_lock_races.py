"""Races of the table commit lock and the source run lease (binlake.lake.leases) on the loopback S3 server.

Real threads and processes against a real S3-API server (moto); a backend wrapper only where the
fault cannot be caused otherwise (a heartbeat request stalled longer than the lock's life, an
exception inside the heartbeat, an adversarial interleaving of two waiters). Lifetimes are a
second or less so the module stays quick.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from binlake.config import S3Settings
from binlake.lake.leases import LeaseHeldError, LocalLeaseBackend, S3LeaseBackend, SourceLeases, TableCommitLocks

ROOT = Path(__file__).resolve().parents[1]
TABLE = "wh/silver/row_changes"
NAME = f"tables/{TABLE}.json"


def _backend(s3_server: Any, bucket: str) -> S3LeaseBackend:
    settings = S3Settings(endpoint_url=s3_server.endpoint_url, path_style_access=True)
    return S3LeaseBackend(f"s3://{bucket}/_binlake/locks/", settings)


def _holder(backend: Any, name: str = NAME) -> str | None:
    data = backend.read(name)
    return None if data is None else str(json.loads(data)["holder"])


class Wrapped:
    """Delegates to a real backend; subclasses add the one fault a test needs."""

    def __init__(self, real: S3LeaseBackend) -> None:
        self.real = real

    def __getattr__(self, attr: str) -> Any:
        return getattr(self.real, attr)


class Interleaved(Wrapped):
    """Two waiters read the same expired lock (a barrier), then the late one's take-over request
    (delete / conditional replace) is sent only after the early one's take-over finished."""

    def __init__(self, real: S3LeaseBackend, barrier: threading.Barrier, late: str) -> None:
        super().__init__(real)
        self.barrier, self.late = barrier, late
        self.reads: set[str] = set()
        self.delayed: set[str] = set()

    def _first_read(self) -> None:
        me = threading.current_thread().name
        if me in ("early", "late") and me not in self.reads:
            self.reads.add(me)
            self.barrier.wait(timeout=10)

    def _maybe_late(self) -> None:
        me = threading.current_thread().name
        if me == self.late and me not in self.delayed:
            self.delayed.add(me)
            time.sleep(0.6)

    def read(self, name: str) -> Any:
        out = self.real.read(name)
        self._first_read()
        return out

    def read_tagged(self, name: str) -> Any:
        out = self.real.read_tagged(name)
        self._first_read()
        return out

    def delete(self, name: str) -> None:
        self._maybe_late()
        self.real.delete(name)

    def replace(self, name: str, data: bytes, tag: str) -> Any:
        self._maybe_late()
        return self.real.replace(name, data, tag)


@pytest.mark.parametrize("store", ["s3", "local"])
def test_two_waiters_taking_over_one_expired_lock_do_not_both_get_it(store: str, s3_server: Any, s3_bucket: str,
                                                                     tmp_path: Path) -> None:
    """Item 1: both see the dead holder's lock expire; the early one takes it over, the late one's
    take-over must fail (If-Match on the expired ETag; locally the digest compare under flock), not
    delete the early one's lock."""
    real: Any = _backend(s3_server, s3_bucket) if store == "s3" else LocalLeaseBackend(tmp_path / "locks")
    TableCommitLocks(real, ttl=0.5).acquire(TABLE, "dead-driver")  # never renewed, never released
    time.sleep(0.6)
    backend = Interleaved(real, threading.Barrier(2), late="late")
    locks = TableCommitLocks(backend, ttl=0.5, wait=2.0)
    won: dict[str, Any] = {}
    refused: list[str] = []

    def wait_for_it() -> None:
        try:
            won[threading.current_thread().name] = locks.acquire(TABLE, threading.current_thread().name)
        except LeaseHeldError as exc:
            refused.append(str(exc))

    threads = [threading.Thread(target=wait_for_it, name=n) for n in ("early", "late")]
    for t in threads:
        t.start()
    # the winner keeps its lock alive (as its heartbeat would) while the loser waits
    deadline = time.monotonic() + 4
    while any(t.is_alive() for t in threads) and time.monotonic() < deadline:
        if "early" in won and hasattr(won["early"], "renew"):
            won["early"].renew()
        time.sleep(0.1)
    for t in threads:
        t.join()
    assert sorted(won) == ["early"]
    assert len(refused) == 1 and "still being written by run 'early'" in refused[0]
    assert _holder(real) == "early"


class StalledRenewal(Wrapped):
    """The holder's first renewal request is sent ``stall`` seconds late (a PUT retried for
    minutes); what the lock object holds right after that late request is recorded."""

    def __init__(self, real: S3LeaseBackend, stall: float) -> None:
        super().__init__(real)
        self.stall = stall
        self.after_late_write: list[str | None] = []

    def _late(self, write: Any) -> Any:
        first = not self.after_late_write and not getattr(self, "_stalled", False)
        if first:
            self._stalled = True
            time.sleep(self.stall)
        out = write()
        if first:
            self.after_late_write.append(_holder(self.real))
        return out

    def overwrite(self, name: str, data: bytes) -> None:
        self._late(lambda: self.real.overwrite(name, data))

    def replace(self, name: str, data: bytes, tag: str) -> Any:
        return self._late(lambda: self.real.replace(name, data, tag))


def test_a_stalled_heartbeat_does_not_overwrite_the_next_holder(s3_server: Any, s3_bucket: str) -> None:
    """Item 2 (and 5): the holder's renewal stalls for 2.5 lifetimes; a waiter takes the lock over;
    the late renewal must not overwrite it, the old holder's release must not delete it, a third
    writer must not get in, and the old holder's fence must say it lost the lock."""
    real = _backend(s3_server, s3_bucket)
    stalled = StalledRenewal(real, stall=2.5)
    old = TableCommitLocks(stalled, ttl=1.0, wait=10)
    new = TableCommitLocks(_backend(s3_server, s3_bucket), ttl=1.0, wait=10)
    b_in = threading.Event()
    b_done = threading.Event()
    b_holder: list[str] = []

    def second_writer() -> None:
        with new.hold(TABLE) as lock:
            b_holder.append(lock.holder)
            b_in.set()
            b_done.wait(10)

    with old.hold(TABLE) as first:
        b = threading.Thread(target=second_writer)
        b.start()
        assert b_in.wait(8), "the waiter never took over the stalled holder's lock"
        time.sleep(2.8)  # the stalled renewal lands meanwhile
        fenced = getattr(first, "is_lost", None)
    assert stalled.after_late_write == [b_holder[0]]  # the late PUT did not replace the new holder's lock
    time.sleep(0.3)
    assert _holder(real) == b_holder[0]  # nor did the old holder's release delete it
    with pytest.raises(LeaseHeldError):
        TableCommitLocks(_backend(s3_server, s3_bucket), ttl=1.0, wait=0.5).acquire(TABLE, "third-driver")
    b_done.set()
    b.join()
    assert fenced is True


class FailingRenewal(Wrapped):
    def overwrite(self, name: str, data: bytes) -> None:
        raise RuntimeError("injected: renewal failed")

    def replace(self, name: str, data: bytes, tag: str) -> Any:
        raise RuntimeError("injected: renewal failed")


def test_an_exception_in_the_heartbeat_marks_the_lock_lost(s3_server: Any, s3_bucket: str) -> None:
    """Item 3 (and 5): the heartbeat thread does not die silently; the writer's check() refuses."""
    from binlake.lake.leases import LockLostError

    locks = TableCommitLocks(FailingRenewal(_backend(s3_server, s3_bucket)), ttl=0.6, wait=5)
    with locks.hold(TABLE) as lock:
        time.sleep(0.45)  # one heartbeat (every 0.2 s) failed; the trusted life (0.45 s) not yet over
        assert lock.is_lost
        with pytest.raises(LockLostError, match=r"table wh/silver/row_changes: the commit lock .* was lost "
                                                r"\(heartbeat failed: RuntimeError: injected: renewal failed\)"):
            lock.check()


def test_a_held_lock_passes_its_fence_while_renewed(s3_server: Any, s3_bucket: str) -> None:
    locks = TableCommitLocks(_backend(s3_server, s3_bucket), ttl=0.6, wait=5)
    with locks.hold(TABLE) as lock:
        time.sleep(1.5)  # several lifetimes, renewed every 0.2 s
        lock.check()
        assert not lock.is_lost
    assert locks.backend.read(NAME) is None


SKEWED_WAITER = r"""
import json, sys, time
real_time = time.time
time.time = lambda: real_time() + 125.0  # this process's wall clock is 125 s ahead
from binlake.config import S3Settings
from binlake.lake.leases import LeaseHeldError, LocalLeaseBackend, S3LeaseBackend, SourceLeases, TableCommitLocks
endpoint, bucket, table = sys.argv[1:4]
backend = S3LeaseBackend(f"s3://{bucket}/_binlake/locks/", S3Settings(endpoint_url=endpoint, path_style_access=True))
out = {}
try:
    TableCommitLocks(backend, ttl=1.0, wait=1.5).acquire(table, "skewed-waiter")
    out["table"] = "taken"
except LeaseHeldError as exc:
    out["table"] = "refused"
try:
    SourceLeases(backend, ttl=60).acquire("orders", "skewed-run")
    out["source"] = "taken"
except LeaseHeldError as exc:
    out["source"] = "refused"
print(json.dumps(out))
"""


def test_a_waiter_with_a_skewed_clock_does_not_steal_a_fresh_lock(s3_server: Any, s3_bucket: str) -> None:
    """Item 4: a waiter process whose clock is 125 s ahead; the table lock is renewed by its holder's
    heartbeat, the source lease was written a moment ago: neither may be taken."""
    backend = _backend(s3_server, s3_bucket)
    leases = SourceLeases(backend, ttl=60)
    with TableCommitLocks(backend, ttl=1.0, wait=5).hold(TABLE):
        leases.acquire("orders", "live-run")
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        done = subprocess.run([sys.executable, "-c", SKEWED_WAITER, s3_server.endpoint_url, s3_bucket, TABLE],
                              capture_output=True, text=True, timeout=60, env=env, cwd=ROOT, check=False)
        assert done.returncode == 0, done.stderr[-2000:]
        assert json.loads(done.stdout.strip().splitlines()[-1]) == {"table": "refused", "source": "refused"}
        holder = leases.current("orders")
        assert holder is not None and holder.holder == "live-run"


WRITER = r"""
import json, sys, time
from binlake.config import S3Settings
from binlake.lake.leases import S3LeaseBackend, TableCommitLocks
endpoint, bucket, table, rounds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
backend = S3LeaseBackend(f"s3://{bucket}/_binlake/locks/", S3Settings(endpoint_url=endpoint, path_style_access=True))
locks = TableCommitLocks(backend, ttl=3.0, wait=60)
spans = []
for _ in range(rounds):
    with locks.hold(table) as lock:
        start = time.monotonic()
        time.sleep(0.05)
        lock.check()
        spans.append((start, time.monotonic()))
print(json.dumps(spans))
"""


def test_writer_processes_never_hold_one_table_at_once(s3_server: Any, s3_bucket: str) -> None:
    """Four processes x two turns each on one table, three-second lock life: the turns (on the
    machine-wide monotonic clock) never overlap. (A one-second life lost its lock to a stalled
    renewal when the suite loaded both cores: the writer then correctly refused to commit.)"""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, s3_server.endpoint_url, s3_bucket, TABLE, "2"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
             for _ in range(4)]
    spans: list[tuple[float, float]] = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err[-2000:]
        spans += [tuple(s) for s in json.loads(out.strip().splitlines()[-1])]
    spans.sort()
    assert len(spans) == 8
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:], strict=False))


def test_lock_objects_with_unknown_fields_or_bad_json_do_not_crash(s3_server: Any, s3_bucket: str,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    """Item 7 (parsing): an unknown field is ignored (the holder still counts); bad JSON is a broken
    lock, taken over with a warning naming the object."""
    backend = _backend(s3_server, s3_bucket)
    now = time.time()
    lease = {"source": "orders", "holder": "newer-binlake-run", "host": "h", "pid": 1, "acquired_at": now,
             "expires_at": now + 60, "priority": 3, "labels": {"team": "x"}}
    assert backend.create("sources/orders.json", json.dumps(lease).encode())
    with pytest.raises(LeaseHeldError, match="'newer-binlake-run'"):
        SourceLeases(backend, ttl=60).acquire("orders", "run-b")
    assert backend.create("sources/billing.json", b"{not json")
    assert SourceLeases(backend, ttl=60).acquire("billing", "run-b").holder == "run-b"
    assert backend.create(NAME, b"\x00\xffgarbage")
    lock = TableCommitLocks(backend, ttl=60, wait=2).acquire(TABLE, "writer-1")
    assert lock.holder == "writer-1" and _holder(backend) == "writer-1"
    assert "lease object sources/billing.json is broken" in caplog.text


def test_source_lease_is_heartbeated_while_a_step_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       s3_server: Any) -> None:
    """Item 7: a step longer than the lease's life keeps it (renewed in the background), and
    releasing it lets the next run in."""
    from binlake.runs import hold_source, release_source, source_leases
    from tests.conftest import make_test_config

    monkeypatch.setenv("BINLAKE_SOURCE_LEASE_TTL", "1.0")
    cfg = make_test_config(tmp_path, s3_server.endpoint_url)
    hold_source(cfg, "orders", "long-run")
    time.sleep(4.0)  # the "step" runs for four lease lifetimes (past the store-clock slack too)
    with pytest.raises(LeaseHeldError, match="'long-run'"):
        source_leases(cfg).acquire("orders", "next-run")
    release_source(cfg, "orders", "long-run")
    assert source_leases(cfg).acquire("orders", "next-run").holder == "next-run"


def test_a_run_that_is_over_does_not_keep_its_sources(s3_server: Any, s3_bucket: str) -> None:
    """Item 7: a run marked failed (its lease fresh, never released) is not waited for when the
    scheduler says it is over; a live one still is."""
    leases = SourceLeases(_backend(s3_server, s3_bucket), ttl=3600)
    leases.acquire("orders", "manual__marked-failed", dag_id="binlake_backfill")
    with pytest.raises(LeaseHeldError):
        leases.acquire("orders", "scheduled__next", holder_finished=lambda lease: False)
    seen: list[tuple[str, str]] = []

    def finished(lease: Any) -> bool:
        seen.append((lease.dag_id, lease.holder))
        return True

    assert leases.acquire("orders", "scheduled__next", holder_finished=finished).holder == "scheduled__next"
    assert seen == [("binlake_backfill", "manual__marked-failed")]


def test_a_delta_rs_commit_under_a_lost_lock_is_refused(s3_server: Any, s3_bucket: str, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Item 5: binlake.lake.delta_tables commits only after the lock's check(); a lost lock (here: its
    heartbeat failed) leaves the table's log untouched."""
    import contextlib

    from binlake.lake import leases
    from binlake.lake.delta_tables import replace_rows
    from binlake.lake.sql_text import DELTA_RS, files_predicate
    from tests.test_delta_tables import _file_rows, _new_table, _rows

    location = str(tmp_path / "meta" / "t")
    _new_table(location)
    lock = TableCommitLocks(FailingRenewal(_backend(s3_server, s3_bucket)), ttl=0.3).acquire(TABLE, "w")
    lock.start_heartbeat()
    time.sleep(0.25)  # its first renewal raised
    monkeypatch.setattr(leases, "table_commit_lock", lambda uri, s3: contextlib.nullcontext(lock))
    with pytest.raises(leases.LockLostError, match="heartbeat failed"):
        replace_rows(location, None, _file_rows([("a", "x", 1)]), files_predicate([("a", "x")], DELTA_RS),
                     partition_by=["source"], txn_app="app:fenced")
    assert _rows(location) == []
    assert sorted(p.name for p in (tmp_path / "meta" / "t" / "_delta_log").glob("*.json")) == [f"{0:020d}.json"]


def test_a_failed_runs_callback_releases_only_its_own_leases(tmp_path: Path, s3_server: Any,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Item 7: the DAGs' on_failure_callback frees the sources the failed run holds, not others'."""
    from binlake.runs import hold_source, source_leases
    from orchestration import tasks
    from tests.conftest import make_test_config

    cfg = make_test_config(tmp_path, s3_server.endpoint_url,
                           sources=[{"name": "a", "uri": str(tmp_path / "a")}, {"name": "b", "uri": str(tmp_path / "b")}])
    monkeypatch.setattr(tasks, "load_config", lambda: cfg)
    monkeypatch.setattr(tasks, "export_airflow_aws_credentials", lambda c: None)
    hold_source(cfg, "a", "scheduled__failed")
    hold_source(cfg, "b", "manual__other")
    tasks.release_run_leases({"run_id": "scheduled__failed", "reason": "timed_out"})
    assert source_leases(cfg).current("a") is None
    other = source_leases(cfg).current("b")
    assert other is not None and other.holder == "manual__other"


def test_airflow_says_whether_a_lease_holding_run_is_over() -> None:
    """The discover task's question to Airflow (RuntimeTaskInstance.get_dagrun_state; the task
    instance is a stand-in: asking needs a running task's supervisor)."""
    from binlake.lake.leases import Lease
    from orchestration.tasks import airflow_run_over

    states = {("binlake_nightly", "scheduled__1"): "failed", ("binlake_nightly", "scheduled__2"): "running"}

    class Ti:
        @staticmethod
        def get_dagrun_state(dag_id: str, run_id: str) -> str:
            return states[(dag_id, run_id)]

    over = airflow_run_over({"ti": Ti()})

    def lease(run: str, dag_id: str = "binlake_nightly") -> Lease:
        return Lease("orders", run, "h", 1, 0.0, 0.0, 60.0, dag_id)

    assert over(lease("scheduled__1")) is True
    assert over(lease("scheduled__2")) is False
    assert over(lease("scheduled__1", dag_id="")) is False  # who knows which DAG: alive
