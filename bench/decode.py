"""Decode throughput and peak memory: binlake vs. other binlog decoders on the same files.

    python bench/decode.py                 # default corpus (generates the 1 GiB OLTP archive and the
                                           # large-row MariaDB corpus, bench/mariadb_corpus.py, once)
    python bench/decode.py FILE...         # the same measurements on the given files
    python bench/decode.py --profile FILE  # + a cProfile of binlake's full decode

Decoders (each run in its own process):

* ``binlake full``   ``binlog_parser.read_events``: every event, every row value decoded, pure
  Python (``BINLAKE_NATIVE=0``).
* ``binlake full (native)``  the same with the compiled rows decoder (``native/``, built by
  ``make setup-native``); "extension not built" when it is missing.
* ``binlake scan``   ``binlog_parser.scan_headers``: framing only (no bodies, no CRC32 check, as
  the ingest plans file splits), pure Python.
* ``binlake scan (native)``  the same with the compiled framing loop, which builds the headers
  without calling Python per event: what the ingest's driver runs when the extension is built.
* ``python-mysql-replication``  its event classes over file bytes (``bench/peers/pymysqlrepl.py``),
  rows fully decoded.
* ``mariadb-binlog -vv``  Debian's C decoder, output to /dev/null (it cannot read MySQL JSON /
  tagged GTIDs / compressed transactions: files it fails on are reported, not hidden).
* ``go-mysql``  ``replication.NewBinlogParser().ParseFile`` (``bench/peers/gomysql``), built with
  ``go build`` from the Go module proxy into ``.bench/`` on first use.
* ``mysql-binlog-connector-java``  ``BinaryLogFileReader`` (``bench/peers/java``), fetched with
  Maven into ``.bench/`` on first use (skipped when Maven/javac are missing).

Peak RSS is the process's VmHWM (``/proc/<pid>/status``): read by the Python workers themselves at
the end, sampled every 5 ms for the external tools (``ru_maxrss`` is not used: a forked child
inherits its parent's peak). The 1 GiB corpus is generated in a separate process.

Throughput = file bytes / seconds (Python decoders time themselves, after interpreter start and
imports; external tools are timed around the process). ``MB/CPU-s`` divides by the CPU seconds
(user + system) instead of wall time: on a shared machine it is the figure that does not depend
on what else runs. The Python workers count their decoding (``resource.getrusage``, after start-up
and imports); the external tools count their whole process (``wait4``: a JVM's start-up and JIT
threads included, which weighs on the small corpora). Each corpus then gets a line per peer:
binlake's full decode with the extension against that peer, in MB per CPU-second. ``--repeat N`` decodes the
files N times in the Python workers (tiny fixture files: per-file start-up would dominate).
events/s uses the number of events binlake finds in the files (the same files for everyone). The last line is
``ratio binlake/python-mysql-replication: N.NN`` (full-decode throughput ratio, all corpora).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH_DIR = ROOT / ".bench"
FIXTURES = ROOT / "tests" / "fixtures"
SAKILA = FIXTURES / "binlogs" / "osheroff__mysql-binlog-connector-java" / "src__test__resources__mysql-bin.sakila"
MARIADB_CHAIN = sorted((FIXTURES / "mariadb-10.11").glob("binlog.0*"))
#: fixture files whose rows average >= 500 bytes (wide rows, TEXT/BLOB): the MariaDB 10.11 chain
#: and three MySQL files
LARGE_ROWS = MARIADB_CHAIN + [FIXTURES / "binlogs" / p for p in (
    "osheroff__mysql-binlog-connector-java/src__test__resources__mysql-bin.checksum-none",
    "osheroff__mysql-binlog-connector-java/src__test__resources__mysql-bin.compressed",
    "blackbeam__rust_mysql_common/test-data__binlogs__mysql-enum-string-set.000001")]
OLTP_DIR = BENCH_DIR / "corpus" / "oltp-1g"
PY = sys.executable

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


# ---------------------------------------------------------------------------------------------
# In-process workers (run as ``python bench/decode.py --worker KIND FILE...``)
# ---------------------------------------------------------------------------------------------

def _cpu_seconds() -> float:
    import resource

    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def _worker(kind: str, files: list[str], repeat: int = 1) -> dict:
    native = None
    if kind.startswith("binlake-"):  # imports before the clock starts
        from binlog_parser import read_events, scan_headers
        from binlog_parser.errors import BinlogError
        from binlog_parser.rows import _native

        native = _native.use_native(kind.endswith("-native"))
    t0, c0 = time.perf_counter(), _cpu_seconds()
    events = rows = errors = 0
    if kind in ("binlake-full", "binlake-full-native"):
        for f in files * repeat:
            try:
                for ev in read_events(f):
                    events += 1
                    r = getattr(ev, "rows", None)
                    if r:
                        rows += len(r)
            except BinlogError:
                errors += 1
    elif kind in ("binlake-scan", "binlake-scan-native"):
        for f in files * repeat:
            try:
                for _h in scan_headers(f):
                    events += 1
            except BinlogError:
                errors += 1
    elif kind == "pymysqlrepl":
        from bench.peers.pymysqlrepl import decode_file

        for f in files * repeat:
            d = decode_file(f)
            events += d["events"]
            rows += d["rows"]
            errors += d["errors"]
    else:
        raise SystemExit(f"unknown worker {kind}")
    return {"events": events, "rows": rows, "errors": errors, "seconds": time.perf_counter() - t0,
            "cpu_seconds": _cpu_seconds() - c0, "rss_mb": _hwm_mb("self"), "native": native}


def _hwm_mb(pid: int | str) -> float | None:
    """Peak RSS (VmHWM) of a live process, MiB. Unlike ``ru_maxrss`` it belongs to the current
    address space only: a forked-then-exec'd child does not inherit its parent's peak."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for ln in fh:
                if ln.startswith("VmHWM:"):
                    return int(ln.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _profile(files: list[str], top: int = 18) -> None:
    import cProfile
    import pstats

    prof = cProfile.Profile()
    prof.enable()
    _worker("binlake-full", files)
    prof.disable()
    print(f"\ncProfile of binlake full decode on {', '.join(Path(f).name for f in files)} "
          f"(tottime, top {top}):")
    pstats.Stats(prof).sort_stats("tottime").print_stats(top)


# ---------------------------------------------------------------------------------------------
# Peers that need building
# ---------------------------------------------------------------------------------------------

def _go_env() -> dict:
    env = dict(os.environ)
    env.setdefault("GOPATH", str(BENCH_DIR / "go" / "path"))
    env.setdefault("GOCACHE", str(BENCH_DIR / "go" / "cache"))
    env["GOFLAGS"] = (env.get("GOFLAGS", "") + " -modcacherw").strip()
    return env


def build_go_peer() -> tuple[Path | None, str]:
    exe = BENCH_DIR / "gomysql-peer"
    if exe.exists():
        return exe, ""
    go = shutil.which("go") or ("/usr/local/go/bin/go" if Path("/usr/local/go/bin/go").exists() else None)
    if go is None:
        return None, "go toolchain not found"
    src = ROOT / "bench" / "peers" / "gomysql"
    BENCH_DIR.mkdir(exist_ok=True)
    r = subprocess.run([go, "build", "-o", str(exe), "."], cwd=src, env=_go_env(),
                       capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        return None, "go build failed: " + (r.stderr.strip().splitlines() or ["?"])[-1]
    return exe, ""


def build_java_peer() -> tuple[list[str] | None, str]:
    """mysql-binlog-connector-java: jar via Maven (bench/peers/java/pom.xml), javac the reader."""
    src = ROOT / "bench" / "peers" / "java"
    out = BENCH_DIR / "java"
    classes = out / "classes"
    jars = out / "lib"
    java, javac, mvn = shutil.which("java"), shutil.which("javac"), shutil.which("mvn")
    if not (java and javac):
        return None, "java/javac not found"
    if not (classes / "BinlogFileBench.class").exists():
        if not jars.exists() or not list(jars.glob("*.jar")):
            if not mvn:
                return None, "mvn not found"
            r = subprocess.run([mvn, "-q", "-B", "-f", str(src / "pom.xml"), "dependency:copy-dependencies",
                                f"-DoutputDirectory={jars}"], capture_output=True, text=True, timeout=900)
            if r.returncode != 0:
                return None, "maven failed: " + (r.stdout + r.stderr).strip()[-200:]
        classes.mkdir(parents=True, exist_ok=True)
        cp = ":".join(str(j) for j in jars.glob("*.jar"))
        r = subprocess.run([javac, "-d", str(classes), "-cp", cp, str(src / "BinlogFileBench.java")],
                           capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            return None, "javac failed: " + r.stderr.strip()[-200:]
    cp = ":".join([str(classes)] + [str(j) for j in jars.glob("*.jar")])
    return [java, "-Xmx512m", "-cp", cp, "BinlogFileBench"], ""


# ---------------------------------------------------------------------------------------------
# Measuring
# ---------------------------------------------------------------------------------------------

@dataclass
class Result:
    corpus: str
    decoder: str
    nbytes: int
    seconds: float | None = None
    events: int | None = None
    rss_mb: float | None = None
    note: str = ""
    rows: int | None = None
    cpu_seconds: float | None = None
    repeat: int = 1

    @property
    def mbps(self) -> float | None:
        return self.nbytes * self.repeat / self.seconds / 1e6 if self.seconds else None

    @property
    def mb_per_cpu_s(self) -> float | None:
        return self.nbytes * self.repeat / self.cpu_seconds / 1e6 if self.cpu_seconds else None


def _run_rss(cmd: list[str], *, devnull_stdout: bool, timeout: float,
             env: dict[str, str] | None = None) -> tuple[int, str, str, float, float, float]:
    """Run ``cmd``; returns (rc, stdout, stderr, wall seconds, peak RSS MiB of that process:
    its VmHWM sampled every 5 ms until it exits, CPU-seconds: user + system of the process and
    the children it waited for, as ``wait4`` reports them; a JVM's start-up and JIT included)."""
    import tempfile

    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as out_f, tempfile.TemporaryFile() as err_f:
        stdout = subprocess.DEVNULL if devnull_stdout else out_f
        p = subprocess.Popen(cmd, stdout=stdout, stderr=err_f, cwd=ROOT, env=env)
        deadline = t0 + timeout
        peak = 0.0
        while True:
            # sample before reaping: VmHWM of the exec'd image (a zombie has no memory left)
            h = _hwm_mb(p.pid)
            if h:
                peak = max(peak, h)
            pid, status, ru = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                p.kill()
                pid, status, ru = os.wait4(p.pid, 0)
                p.returncode = -9
                return -9, "", "timeout", time.perf_counter() - t0, peak, ru.ru_utime + ru.ru_stime
            time.sleep(0.005)
        wall = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        out_f.seek(0)
        err_f.seek(0)
        # ru_maxrss would include the parent's RSS inherited at fork: use the sampled VmHWM
        return (p.returncode, out_f.read().decode(errors="replace"), err_f.read().decode(errors="replace"),
                wall, peak, ru.ru_utime + ru.ru_stime)


_PY_WORKERS = {"binlake full": "binlake-full", "binlake full (native)": "binlake-full-native",
               "binlake scan": "binlake-scan", "binlake scan (native)": "binlake-scan-native",
               "python-mysql-replication": "pymysqlrepl"}
_NATIVE_ROWS = ("binlake full (native)", "binlake scan (native)")


def measure(corpus: str, files: list[str], decoders: list[str], timeout: float,
            events_ref: int | None, repeat: int = 1) -> list[Result]:
    nbytes = sum(os.path.getsize(f) for f in files)
    out: list[Result] = []
    for dec in decoders:
        res = Result(corpus, dec, nbytes)
        if dec in _PY_WORKERS:
            res.repeat = repeat
            # the pure row is pure everywhere: BINLAKE_NATIVE=0 also keeps the compiled slots
            # constructors (binlog_parser._fast) out
            env = dict(os.environ, BINLAKE_NATIVE="1" if dec in _NATIVE_ROWS else "0")
            rc, so, se, wall, rss, _cpu = _run_rss([PY, str(Path(__file__).resolve()), "--worker", _PY_WORKERS[dec],
                                             "--repeat", str(repeat), *files],
                                            devnull_stdout=False, timeout=timeout, env=env)
            if rc == 0:
                d = json.loads(so.strip().splitlines()[-1])
                res.seconds, res.events, res.rows = d["seconds"], d["events"], d["rows"]
                res.cpu_seconds = d.get("cpu_seconds")
                rss = d.get("rss_mb") or rss  # exact, read by the worker itself at the end
                if d["errors"]:
                    res.note = f"{d['errors']} error(s)"
                if dec in _NATIVE_ROWS and not d.get("native"):
                    res.note = "extension not built: pure Python (make setup-native)"
            else:
                res.note = "timeout" if rc == -9 else f"failed: {se.strip().splitlines()[-1:]}"
            res.rss_mb = rss
        elif dec == "mariadb-binlog -vv":
            exe = shutil.which("mariadb-binlog")
            if not exe:
                res.note = "not installed"
            else:
                total = cpu_total = 0.0
                peak = 0.0
                failed = []
                for f in files:
                    rc, _so, se, wall, rss, cpu = _run_rss([exe, "-vv", f], devnull_stdout=True, timeout=timeout)
                    total += wall
                    cpu_total += cpu
                    peak = max(peak, rss)
                    if rc != 0:
                        failed.append(Path(f).name)
                res.seconds, res.rss_mb, res.cpu_seconds = total, peak, cpu_total
                if failed:
                    res.note = f"cannot read {len(failed)}/{len(files)} file(s)"
                    if len(failed) == len(files):
                        res.seconds = None
        elif dec == "go-mysql":
            go_exe, why = build_go_peer()
            if go_exe is None:
                res.note = why
            else:
                rc, so, se, wall, rss, cpu = _run_rss([str(go_exe), *files], devnull_stdout=False, timeout=timeout)
                res.seconds, res.rss_mb, res.cpu_seconds = wall, rss, cpu
                parts = so.split()
                if len(parts) == 3:
                    res.rows = int(parts[1])
                    if int(parts[2]):
                        res.note = f"errors in {parts[2]} file(s)"
                if rc != 0:
                    res.note = f"failed rc={rc}"
        elif dec == "mysql-binlog-connector-java":
            cmd, why = build_java_peer()
            if cmd is None:
                res.note = why
            else:
                rc, so, se, wall, rss, cpu = _run_rss([*cmd, *files], devnull_stdout=False, timeout=timeout)
                res.rss_mb, res.cpu_seconds = rss, cpu
                try:
                    d = json.loads(so.strip().splitlines()[-1])
                    res.seconds = d["seconds"]
                    res.rows = d["rows"]
                    if d.get("errors"):
                        res.note = f"errors in {d['errors']} file(s)"
                except (ValueError, IndexError, KeyError):
                    res.note = f"failed rc={rc}: {se.strip()[-120:]}"
        if res.events is None and res.seconds:
            res.events = events_ref * res.repeat if events_ref is not None else None
        out.append(res)
    return out


# ---------------------------------------------------------------------------------------------
# Corpus
# ---------------------------------------------------------------------------------------------

def oltp_corpus(size: str, quiet: bool) -> list[str]:
    target = OLTP_DIR / "src1" / "binlog.000001"
    marker = OLTP_DIR / f".size-{size}"
    if target.exists() and marker.exists():
        return [str(p) for p in sorted((OLTP_DIR / "src1").glob("binlog.*"))]
    if OLTP_DIR.exists():
        shutil.rmtree(OLTP_DIR)
    print(f"[bench] generating the {size} OLTP archive into {OLTP_DIR} (once) ...", file=sys.stderr, flush=True)
    t0 = time.monotonic()
    # sysbench-style tables only (MariaDB's decoder cannot read MySQL JSON); one file of `size`.
    # In a child process: the parent stays small.
    code = ("import sys; from binlake_testing.synthetic import SyntheticConfig, _size, generate; "
            f"s = _size({size!r}); "
            "generate(sys.argv[1], SyntheticConfig(bytes_per_server=s, max_binlog_size=s + (1 << 20), "
            "workload='oltp', orders=False, seed=1, tables=8, rows_per_table=10000))")
    subprocess.run([PY, "-c", code, str(OLTP_DIR)], check=True, cwd=ROOT)
    marker.write_text("")
    print(f"[bench] generated in {time.monotonic() - t0:.0f} s", file=sys.stderr, flush=True)
    return [str(p) for p in sorted((OLTP_DIR / "src1").glob("binlog.*"))]


def count_events(files: list[str]) -> int:
    from binlog_parser import scan_headers
    from binlog_parser.errors import BinlogError

    n = 0
    for f in files:
        try:
            for _ in scan_headers(f):
                n += 1
        except BinlogError:
            pass
    return n


# ---------------------------------------------------------------------------------------------
# Output
# ---------------------------------------------------------------------------------------------

def _fmt(v: float | None, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def table(results: list[Result]) -> str:
    head = ("corpus", "decoder", "MB", "seconds", "MB/s", "CPU s", "MB/CPU-s", "events/s", "peak RSS MB",
            "note")
    rows = []
    for r in results:
        eps = r.events / r.seconds if (r.events and r.seconds) else None
        mb = f"{r.nbytes / 1e6:.1f}" + (f" x{r.repeat}" if r.repeat > 1 else "")
        rows.append((r.corpus, r.decoder, mb, _fmt(r.seconds, ".2f"), _fmt(r.mbps, ".1f"),
                     _fmt(r.cpu_seconds, ".2f"), _fmt(r.mb_per_cpu_s, ".1f"), _fmt(eps, ",.0f"),
                     _fmt(r.rss_mb, ".0f"), r.note))
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    line = lambda cells: "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths)) + " |"  # noqa: E731
    sep = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line(head), sep] + [line(r) for r in rows])


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for ln in Path("/proc/cpuinfo").read_text().splitlines():
            if ln.startswith("model name"):
                cpu = ln.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = ""
    try:
        kb = int(Path("/proc/meminfo").read_text().split()[1])
        mem = f", {kb / 2**20:.0f} GiB RAM"
    except (OSError, ValueError, IndexError):
        pass
    return f"{cpu}, {os.cpu_count()} cores{mem}, Python {platform.python_version()}, {platform.system()}"


DECODERS = ["binlake full", "binlake full (native)", "binlake scan", "binlake scan (native)",
            "python-mysql-replication", "mariadb-binlog -vv", "go-mysql", "mysql-binlog-connector-java"]


def _ensure_venv() -> None:
    """``python bench/decode.py`` with a system Python: re-run under the project's .venv."""
    try:
        import pymysqlreplication  # noqa: F401
        import zstandard  # noqa: F401
    except ImportError:
        venv_py = ROOT / ".venv" / "bin" / "python"
        if venv_py.exists() and Path(sys.executable).resolve() != venv_py.resolve():
            os.execv(str(venv_py), [str(venv_py), str(Path(__file__).resolve()), *sys.argv[1:]])
        raise


def _print_ratios(name: str, by: dict[str, Result]) -> None:
    """MB per CPU-second of one corpus: native against pure, the native header scan (the
    ingest's split planning) against the native full decode, and the native full decode against
    each peer that read every file without an error (its figure would be over less work).
    Nothing when either side has a note."""
    peers = [d for d in DECODERS if not d.startswith("binlake")]
    for label, num, den in (("native/pure", "binlake full (native)", "binlake full"),
                            ("native scan/full", "binlake scan (native)", "binlake full (native)"),
                            *((f"native/{peer}", "binlake full (native)", peer) for peer in peers)):
        a, b = by.get(num), by.get(den)
        if a and b and a.mb_per_cpu_s and b.mb_per_cpu_s and not b.note:
            print(f"{label} MB per CPU-second, {name}: {a.mb_per_cpu_s:.1f} / {b.mb_per_cpu_s:.1f} "
                  f"= {a.mb_per_cpu_s / b.mb_per_cpu_s:.2f}x")


def main(argv: list[str] | None = None) -> int:
    args_in = sys.argv[1:] if argv is None else argv
    if "--worker" not in args_in:
        _ensure_venv()
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="*", help="binlog files (default: the standard corpus)")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--mariadb-rows", type=int, default=20000,
                    help="rows of the large-row MariaDB corpus written by mariadbd (0: skip it)")
    ap.add_argument("--repeat", type=int, default=1,
                    help="decode the files N times in the Python workers (tiny files)")
    ap.add_argument("--size", default="1GiB", help="size of the generated OLTP corpus (default 1GiB)")
    ap.add_argument("--skip", default="", help="comma list of decoders to skip (e.g. java,python)")
    ap.add_argument("--timeout", type=float, default=3600, help="per decoder and corpus, seconds")
    ap.add_argument("--profile", action="store_true", help="cProfile binlake's full decode afterwards")
    ap.add_argument("--json", help="also write the results as JSON here")
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(argv)
    if args.worker:
        print(json.dumps(_worker(args.worker, args.files, args.repeat)))
        return 0

    if args.files:
        corpora = [("given files", [str(Path(f).resolve()) for f in args.files])]
    else:
        corpora = [("sakila (5.5, v1 rows)", [str(SAKILA)]),
                   ("MariaDB 10.11 chain", [str(p) for p in MARIADB_CHAIN]),
                   ("large rows (MariaDB 10.11 + 3)", [str(p) for p in LARGE_ROWS]),
                   (f"OLTP {args.size} (8.0.40)", oltp_corpus(args.size, args.quiet))]
        if args.mariadb_rows:
            from bench.mariadb_corpus import corpus as mariadb_corpus

            try:
                corpora.insert(2, (f"MariaDB 10.11 large rows ({args.mariadb_rows} rows)",
                                   mariadb_corpus(args.mariadb_rows)))
            except SystemExit as exc:  # no mariadbd here: say so, measure the rest
                print(f"[bench] large-row MariaDB corpus skipped: {exc}", file=sys.stderr, flush=True)
    skip = [s.strip().lower() for s in args.skip.split(",") if s.strip()]
    decoders = [d for d in DECODERS if not any(s in d.lower() for s in skip)]
    started = _dt.datetime.now(_dt.UTC)
    results: list[Result] = []
    for name, files in corpora:
        if not args.quiet:
            print(f"[bench] {name}: {len(files)} file(s), {sum(os.path.getsize(f) for f in files) / 1e6:.1f} MB",
                  file=sys.stderr, flush=True)
        ref = count_events(files)
        for r in measure(name, files, decoders, args.timeout, ref, args.repeat):
            results.append(r)
            if not args.quiet:
                print(f"[bench]   {r.decoder}: {_fmt(r.mbps, '.1f')} MB/s, {_fmt(r.mb_per_cpu_s, '.1f')} MB/CPU-s "
                      f"{r.note}", file=sys.stderr, flush=True)
    print(f"binlog decode benchmark, {started:%Y-%m-%d %H:%M} UTC, {machine()}")
    print(table(results))
    if args.json:
        Path(args.json).write_text(json.dumps([r.__dict__ | {"mbps": r.mbps, "mb_per_cpu_s": r.mb_per_cpu_s}
                                               for r in results], indent=1))
    if args.profile:
        _profile(corpora[-1][1][:1])

    def total(dec: str) -> tuple[int, float] | None:
        rs = [r for r in results if r.decoder == dec and r.seconds]
        if not rs:
            return None
        return sum(r.nbytes * r.repeat for r in rs), sum(r.seconds for r in rs)  # type: ignore[misc]

    for name, _files in corpora:
        _print_ratios(name, {r.decoder: r for r in results if r.corpus == name})
    ours, theirs = total("binlake full"), total("python-mysql-replication")
    if ours and theirs:
        ratio = (ours[0] / ours[1]) / (theirs[0] / theirs[1])
        print(f"ratio binlake/python-mysql-replication: {ratio:.2f}")
    else:
        print("ratio binlake/python-mysql-replication: n/a")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
