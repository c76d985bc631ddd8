"""``binlake archive``: a replica that streams a live server's binlogs into the archive, byte for byte.

The connection, TLS and authentication (incl. ``caching_sha2_password``) are PyMySQL's; binlake's own
code sends the dump commands and frames the stream (:mod:`binlog_parser.replication`) and writes the
files (:mod:`binlake.archive.files`). The archive itself is the only state: a restart resumes from
its own files, so kill -9 at any moment loses nothing and duplicates nothing.

Settings (:class:`ArchiverSettings`): CLI flags > ``BINLAKE_ARCHIVE_<KEY>`` env > the binlake config's
``[archive.<source>]`` table > its ``[archive]`` table > defaults; the keys, their types and defaults
are declared once, in :class:`binlake.config.ArchiveSettings` (validated with the rest of the config).
The destination is the source's ``[[sources]]`` uri (or ``--dest``), the object store the config's
``[s3]``. The password never comes from a file or a flag: ``BINLAKE_ARCHIVE_PASSWORD``, ``MYSQL_PWD``
or an Airflow connection (resolved by the command line, :mod:`binlake_cli.archive`, which is also the
service entry: this module imports no Airflow).

Nothing lets the server (or whoever sits between) choose where bytes go or splice two servers: names
from ROTATE events are checked (:func:`binlake.archive.files.check_binlog_name`), the destination
has one archiver at a time (:mod:`binlake.archive.guard`: a spool lock and a destination lease)
and every object write is conditional on this archiver's last ETag; the server's identity is
recorded per archived series and a resume against another server is refused (``--new-series``
starts a new one on purpose). Errors that need an operator (:class:`ArchiverFatalError`) set the
status to failed and exit 2, which the systemd unit's ``RestartPreventExitStatus=2`` does not restart.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import ssl
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pymysql
from pydantic import StrictBool, StrictStr, TypeAdapter, ValidationError
from pydantic.dataclasses import dataclass as pydantic_dataclass

from binlake.archive.errors import (
    ArchiveFileError,
    ArchiverError,
    ArchiverFatalError,
    BinlogPurgedError,
    DifferentServerError,
)
from binlake.archive.files import (
    SAFE_BINLOG_NAME,
    ArchiveFiles,
    ResumePoint,
    binlog_sort_key,
    check_binlog_name,
)
from binlake.archive.guard import (
    DestinationLease,
    SeriesRecord,
    ServerIdentity,
    SpoolLock,
    continuation_mismatch,
    fde_mismatch,
    meta_backend,
    read_series,
    write_series,
)
from binlake.config import ArchiveSettings, BinlakeConfig, S3Settings, config_from_dict, load_config
from binlake.errors import BinlakeError
from binlake.lake.storage import ObjectStore, open_object_store
from binlog_parser import replication as rpl
from binlog_parser.constants import EventType

log = logging.getLogger("binlake.archive.archiver")


#: exit status of an error that needs an operator (systemd: ``RestartPreventExitStatus=2``)
EXIT_FATAL = 2


def exit_code_of(exc: BaseException) -> int:
    """2 for an error that a restart would only repeat (fatal, unsafe names, conflicts), else 1."""
    return EXIT_FATAL if isinstance(exc, ArchiverFatalError | ArchiveFileError) else 1


@pydantic_dataclass(frozen=True, kw_only=True, config={"extra": "forbid"})
class ArchiverSettings(ArchiveSettings):
    """One source's archiver run: its :class:`~binlake.config.ArchiveSettings` plus where the files go."""

    source: StrictStr
    dest: StrictStr  # the source's archive prefix: s3://bucket/prefix/ or a folder
    #: accept this server as the start of a new archived series (after a failover or RESET MASTER),
    #: from ``start_file`` (or the server's first binlog); a flag of one run, not a config key
    new_series: StrictBool = False
    s3: S3Settings = S3Settings()

    @property
    def source_spool(self) -> Path:
        return Path(self.spool_dir or "binlake-spool") / self.source


_ENV_PREFIX = "BINLAKE_ARCHIVE_"
#: ArchiverSettings keys that env and flags may set (``s3`` comes from the config's [s3] and --s3-endpoint-url)
_RUN_KEYS = tuple(f.name for f in dataclasses.fields(ArchiverSettings) if f.name != "s3")


def _env_layer(env: Mapping[str, str]) -> dict[str, Any]:
    """``BINLAKE_ARCHIVE_<KEY>`` values, parsed from text (``3307``, ``true``) into the keys' types."""
    raw = {key: env[_ENV_PREFIX + key.upper()] for key in _RUN_KEYS if env.get(_ENV_PREFIX + key.upper())}
    source, dest = raw.pop("source", None), raw.pop("dest", None)
    raw.pop("new_series", None)  # a decision for one run, never a standing setting
    try:
        parsed = TypeAdapter(ArchiveSettings).validate_python(raw, strict=False)
    except ValidationError as exc:
        raise ArchiverError("bad archive settings (env): " + "; ".join(
            f"{_ENV_PREFIX}{'.'.join(map(str, e['loc'])).upper()}: {e['msg']}" for e in exc.errors())) from None
    out: dict[str, Any] = {key: getattr(parsed, key) for key in raw}
    out.update({k: v for k, v in (("source", source), ("dest", dest)) if v})
    return out


def _s3_with_endpoint(s3: S3Settings, endpoint: str | None) -> S3Settings:
    """``--s3-endpoint-url``: a custom endpoint, path-style, plain HTTP for http:// (as in the config)."""
    if not endpoint:
        return s3
    return dataclasses.replace(s3, endpoint_url=endpoint, path_style_access=True,
                               ssl_enabled=not endpoint.startswith("http://"))


def load_settings(cli: dict[str, Any], config_path: str | None,
                  env: Mapping[str, str] | None = None) -> ArchiverSettings:
    """Merge CLI flags, ``BINLAKE_ARCHIVE_*`` env and the config's ``[archive]`` tables (already
    validated by :func:`binlake.config.load_config`); no config file: defaults + env."""
    env = os.environ if env is None else env
    cfg: BinlakeConfig = (load_config(config_path, env) if config_path
                          else config_from_dict({}, base=Path.cwd(), env=env))
    flags = {k: (str(v) if isinstance(v, Path) else v) for k, v in cli.items() if v is not None}
    endpoint = flags.pop("s3_endpoint_url", None)
    layers: dict[str, Any] = {**_env_layer(env), **flags}
    source = str(layers.get("source") or "")
    base = cfg.archive.for_source(source) if cfg.archive else ArchiveSettings()
    values: dict[str, Any] = {**asdict(base), **layers}
    if not values.get("spool_dir"):
        values["spool_dir"] = str(Path(cfg.state_dir) / "archive-spool")
    if "dest" not in values:
        if source not in {s.name for s in cfg.sources}:
            raise ArchiverError(f"no --dest for source {source!r} and no [[sources]] entry of that name in "
                                f"{config_path or 'the config (none given: --config or BINLAKE_CONFIG)'}")
        values["dest"] = cfg.source(source).uri
    try:
        return ArchiverSettings(**values, s3=_s3_with_endpoint(cfg.s3, endpoint))
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'settings'}: {e['msg']}" for e in exc.errors())
        raise ArchiverError(f"bad archive settings ({config_path or 'flags/env'}): {problems}") from None


# --- connection ---------------------------------------------------------------------------------


def password_from_env() -> str:
    """The replica's password: ``BINLAKE_ARCHIVE_PASSWORD``, else ``MYSQL_PWD``. Never logged."""
    return os.environ.get("BINLAKE_ARCHIVE_PASSWORD") or os.environ.get("MYSQL_PWD") or ""


def _ssl_context(settings: ArchiverSettings) -> ssl.SSLContext | None:
    """TLS as MySQL's ``--ssl-mode``: preferred (PyMySQL's default: TLS when the server offers it,
    unverified, so a man in the middle can strip or intercept it), required (TLS or fail), disabled.

    With ``ssl_ca`` set, in any mode but disabled, TLS is required and verified: the certificate
    against that CA and, unless ``ssl_verify_identity = false``, the host name too (PyMySQL makes a
    given context mandatory: a server, or a man in the middle, that offers no TLS is refused)."""
    if settings.ssl_mode != "required" and not (settings.ssl_ca or settings.ssl_cert):
        return None
    ctx = ssl.create_default_context(cafile=settings.ssl_ca)
    verify_identity = settings.ssl_verify_identity if settings.ssl_verify_identity is not None else True
    ctx.check_hostname = bool(settings.ssl_ca) and verify_identity
    if not settings.ssl_ca:
        ctx.verify_mode = ssl.CERT_NONE  # encrypted, not authenticated (MySQL's REQUIRED)
    if settings.ssl_cert:
        ctx.load_cert_chain(settings.ssl_cert, settings.ssl_key)
    return ctx


def connect(settings: ArchiverSettings, password: str) -> pymysql.connections.Connection:
    return pymysql.connect(
        host=settings.host, port=settings.port, user=settings.user, password=password, ssl=_ssl_context(settings),
        ssl_disabled=settings.ssl_mode == "disabled",
        connect_timeout=10, read_timeout=settings.read_timeout_s or max(4 * settings.heartbeat_s, 10.0),
        write_timeout=60, autocommit=True)


@dataclass(frozen=True)
class ServerInfo:
    """What the archiver asks the server before dumping."""

    is_mariadb: bool
    checksum: str
    gtid_position: str
    identity: ServerIdentity | None = None


def prepare_replica(conn: pymysql.connections.Connection, settings: ArchiverSettings) -> ServerInfo:
    """Session variables a replica sets before COM_BINLOG_DUMP (what MariaDB/MySQL's own replicas send)."""
    with conn.cursor() as cur:
        cur.execute("SELECT VERSION(), @@global.binlog_checksum")
        version, checksum = cur.fetchone() or ("", "NONE")
        is_mariadb = "mariadb" in str(version).lower()
        # Events as on disk: with their CRC32 (a replica that does not say so gets them stripped/refused).
        cur.execute("SET @master_binlog_checksum = @@global.binlog_checksum")
        cur.execute("SET @master_heartbeat_period = %s", (int(settings.heartbeat_s * 1e9),))
        if is_mariadb:
            cur.execute("SET @mariadb_slave_capability = %s", (rpl.MARIA_SLAVE_CAPABILITY_GTID,))
            cur.execute("SELECT @@global.gtid_binlog_pos")
        else:
            cur.execute("SELECT @@global.gtid_executed")
        gtid_position = str((cur.fetchone() or ("",))[0] or "")
        identity = server_identity(cur, is_mariadb)
    return ServerInfo(is_mariadb, str(checksum), gtid_position, identity)


def server_identity(cur: pymysql.cursors.Cursor, is_mariadb: bool) -> ServerIdentity:
    """Which server this is (what a series record keeps): see :class:`ServerIdentity`."""
    if is_mariadb:
        cur.execute("SELECT @@global.server_id, @@global.gtid_domain_id")
        server_id, domain = cur.fetchone() or (0, 0)
        return ServerIdentity("mariadb", int(server_id or 0), None, int(domain or 0))
    cur.execute("SELECT @@global.server_id, @@global.server_uuid")
    server_id, uuid = cur.fetchone() or (0, "")
    return ServerIdentity("mysql", int(server_id or 0), str(uuid or ""), None)


def send_command(conn: pymysql.connections.Connection, payload: bytes) -> None:
    """Write a command packet on PyMySQL's socket (sequence id 0; the answer starts at 1).

    PyMySQL has no public API for replication commands; like python-mysql-replication we use its
    ``_write_bytes`` / ``_next_seq_id`` / ``_rfile`` (stable since PyMySQL 0.6) and keep the
    packets and the framing our own.
    """
    raw: Any = conn
    raw._next_seq_id = 0
    raw._write_bytes(rpl.frame_packets(payload))
    raw._next_seq_id = 1


def read_ok(conn: pymysql.connections.Connection) -> None:
    """The answer to COM_REGISTER_SLAVE: OK, or PyMySQL raises the server's error (e.g. no grant)."""
    raw: Any = conn
    raw._read_packet()


def register_and_dump(conn: pymysql.connections.Connection, settings: ArchiverSettings,
                      point: ResumePoint | None) -> None:
    """COM_REGISTER_SLAVE (answered by OK), then COM_BINLOG_DUMP from ``point`` (None: first binlog)."""
    send_command(conn, rpl.register_slave_payload(settings.server_id))
    read_ok(conn)
    flags = rpl.BINLOG_SEND_ANNOTATE_ROWS_EVENT | (rpl.BINLOG_DUMP_NON_BLOCK if settings.stop_at_end else 0)
    name, position = (point.file, point.position) if point else (settings.start_file or "", 4)
    send_command(conn, rpl.binlog_dump_payload(settings.server_id, name, position, flags))


def file_of_gtid(settings: ArchiverSettings, password: str, info: ServerInfo, gtid: str) -> str:
    """The binlog file a GTID start falls in: dump by GTID, read the artificial ROTATE, hang up.

    Why: a file-by-file archive must start at a file's first byte to be byte-identical, so a GTID
    start means "the whole file that holds this GTID".
    """
    conn = connect(settings, password)
    try:
        prepare_replica(conn, settings)
        if info.is_mariadb:
            with conn.cursor() as cur:
                cur.execute("SET @slave_connect_state = %s", (gtid,))
                cur.execute("SET @slave_gtid_strict_mode = 1")
            send_command(conn, rpl.register_slave_payload(settings.server_id))
            read_ok(conn)
            send_command(conn, rpl.binlog_dump_payload(settings.server_id, "", 4, 0))
        else:
            send_command(conn, rpl.binlog_dump_gtid_payload(settings.server_id, rpl.parse_mysql_gtid_set(gtid)))
        decoder = rpl.DumpStreamDecoder()
        while True:
            for item in decoder.feed(_read_chunk(conn)):
                if isinstance(item, rpl.StreamError):
                    raise BinlogPurgedError(f"the server cannot stream from GTID {gtid}: {item.message} "
                                            f"(error {item.code})")
                if isinstance(item, rpl.StreamEvent) and item.is_rotate:
                    return check_binlog_name(item.rotate_target(4 if info.checksum.upper() == "CRC32" else 0)[0])
    finally:
        conn.close()


def _read_chunk(conn: pymysql.connections.Connection) -> bytes:
    """Whatever the socket has (PyMySQL's buffered reader); b'' never returns: a closed socket raises."""
    raw: Any = conn
    try:
        data = raw._rfile.read1(1 << 16)
    except (OSError, ValueError) as exc:
        raise ConnectionError(f"lost the replication connection: {exc}") from exc
    if not data:
        raise ConnectionError("the server closed the replication connection")
    return bytes(data)


# --- progress -----------------------------------------------------------------------------------


@dataclass
class Progress:
    """Counters for the progress log and the status file."""

    source: str
    started_at: float = field(default_factory=time.time)
    bytes_archived: int = 0
    events_archived: int = 0
    current_file: str = ""
    position: int = 0
    last_event_timestamp: int = 0
    last_gtid: str | None = None
    server_gtid_position: str = ""
    caught_up: bool = False
    files_closed: int = 0
    reconnects: int = 0
    state: str = "starting"
    last_error: str | None = None

    def lag_seconds(self, now: float) -> float | None:
        if self.caught_up:
            return 0.0
        return max(0.0, now - self.last_event_timestamp) if self.last_event_timestamp else None

    def lag_gtids(self) -> int | None:
        """Transactions the server has that the archive has not (MariaDB ``domain-server-seq``)."""
        if not self.last_gtid or "-" not in self.last_gtid or ":" in self.last_gtid:
            return None  # none yet, or a MySQL uuid:gno GTID (no per-domain sequence to subtract)
        archived = {p.split("-")[0]: int(p.split("-")[2]) for p in [self.last_gtid]}
        lag = 0
        for part in filter(None, self.server_gtid_position.split(",")):
            domain, _, seq = part.strip().split("-")
            if domain in archived:
                lag += max(0, int(seq) - archived[domain])
        return lag

    def as_status(self, now: float) -> dict[str, Any]:
        out = asdict(self)
        out.update(lag_seconds=self.lag_seconds(now), lag_gtids=self.lag_gtids(), updated_at=now,
                   pid=os.getpid(), mb_per_s=self.bytes_archived / 1e6 / max(now - self.started_at, 1e-9))
        return out


def write_status(path: Path, progress: Progress, now: float) -> None:
    """The status file (atomic replace); a spool that cannot take it is logged, never fatal here."""
    tmp = path.with_suffix(".tmp")
    try:
        tmp.write_text(json.dumps(progress.as_status(now), indent=2))
        tmp.replace(path)
    except OSError as exc:
        log.error("cannot write the status file %s: %s", path, exc)


#: client/server error codes that mean "the connection went away", worth a reconnect: can't connect,
#: gone away, lost, server shutdown in progress, connection killed
TRANSIENT_MYSQL_ERRORS = frozenset({2003, 2006, 2013, 2055, 1053, 1927})


def is_transient(exc: BaseException) -> bool:
    """A lost connection (retry) as opposed to a refusal such as a wrong password or a missing grant."""
    if isinstance(exc, ConnectionError):
        return True
    if isinstance(exc, pymysql.err.OperationalError | pymysql.err.InterfaceError):
        return bool(exc.args) and exc.args[0] in TRANSIENT_MYSQL_ERRORS
    return False


def _mysql_error_text(exc: BaseException) -> str:
    if isinstance(exc, pymysql.err.MySQLError) and len(exc.args) >= 2:
        return f"{exc.args[1]} (error {exc.args[0]})"
    return str(exc)


# --- the stream loop ----------------------------------------------------------------------------


class Archiver:
    """One source's archiver: connects, resumes from its files, streams until stopped (or the end)."""

    #: the first wait before a reconnect (doubling, at most 30 s); tests shorten it
    reconnect_wait_s = 0.5

    def __init__(self, settings: ArchiverSettings, store: ObjectStore | None = None,
                 password: str | None = None) -> None:
        """``password``: the replica user's (default :func:`password_from_env`); the command line
        passes the one of an Airflow connection (``airflow_conn_id``) here."""
        self.settings = settings
        self._password = password_from_env() if password is None else password
        self.store = store or open_object_store(settings.dest, settings.s3)
        settings.source_spool.mkdir(parents=True, exist_ok=True)
        self.files = ArchiveFiles(self.store, settings.source_spool, settings.upload_bytes,
                                  settings.upload_interval_s, settings.fsync_interval_s)
        self.progress = Progress(settings.source)
        self.status_path = settings.source_spool / "status.json"
        self._last_report = 0.0
        self._last_progress = 0.0
        self.meta = meta_backend(settings.dest, settings.s3, getattr(self.store, "client", None))
        self.spool_lock = SpoolLock(settings.source_spool)
        self.lease = DestinationLease(self.meta, settings.dest)
        self.series: SeriesRecord | None = None
        self._series_loaded = False
        self._new_series_done = False
        #: the archive's last GTID, which the next file's PREVIOUS_GTIDS / GTID_LIST must hold
        self._continues_gtid: str | None = None

    def run(self) -> int:
        """Stream with reconnects; 0 when a --stop-at-end run is done. Errors set the status to failed
        (not when the spool is another process's: its status file is that archiver's)."""
        self.spool_lock.acquire()
        try:
            try:
                self.lease.acquire()
                self._sessions()
            except (pymysql.err.MySQLError, ConnectionError) as exc:
                raise ArchiverError(
                    f"{self.settings.source}: the server {self.settings.host}:{self.settings.port} refused or "
                    f"dropped the replica: {_mysql_error_text(exc)}") from exc
            except OSError as exc:
                raise ArchiverFatalError(
                    f"{self.settings.source}: the archive's local files failed: {exc.strerror or exc} "
                    f"({_short(exc.filename) if exc.filename else 'spool ' + str(self.settings.source_spool)}); "
                    "fix the spool or archive folder and restart") from exc
        except BinlakeError as exc:
            self._set_state("failed", str(exc))
            raise
        finally:
            self.files.detach()
            self.lease.release()
            self.spool_lock.release()
        self._set_state("stopped", None)
        return 0

    def _sessions(self) -> None:
        """Sessions until one ends the run; a lost connection is retried with backoff. The budget
        (``reconnect_attempts`` sessions in a row without progress) starts afresh after a session that
        archived anything, so a peer that drops every session still gets everything archived."""
        failures = 0
        while True:
            before = self.progress.events_archived
            self.lease.renew()  # a long outage's backoff must not let it lapse unnoticed
            try:
                self._session()
                return
            except Exception as exc:
                if not is_transient(exc):
                    raise
                failures = 1 if self.progress.events_archived > before else failures + 1
                if failures >= self.settings.reconnect_attempts:
                    raise
                self._before_reconnect(exc)
                time.sleep(min(self.reconnect_wait_s * 2 ** (failures - 1), 30.0))

    def _before_reconnect(self, exc: BaseException) -> None:
        self.files.detach()
        self.progress.reconnects += 1
        log.warning("%s: replication connection lost (%s); reconnecting", self.settings.source, exc)
        self._set_state("reconnecting", str(exc))

    def _set_state(self, state: str, error: str | None) -> None:
        self.progress.state, self.progress.last_error = state, error
        write_status(self.status_path, self.progress, time.time())

    def _session(self) -> None:
        """One connection: resume point from the files, dump, write until EOF (non-blocking) or error."""
        if not self._series_loaded:
            self.series, self._series_loaded = read_series(self.meta), True
            if self.series is not None and self.series.first_file:
                self.files.base = _base_of(self.series.first_file)
        point = self._checked_point(self.files.resume_point())
        conn = connect(self.settings, self._password)
        try:
            info = prepare_replica(conn, self.settings)
            self.progress.server_gtid_position = info.gtid_position
            point = self._check_series(info, point)
            if point is None and self.settings.start_gtid:
                point = ResumePoint(file_of_gtid(self.settings, self._password, info, self.settings.start_gtid), 4)
            self._continues_gtid = point.last_gtid if point and point.position <= 4 else None
            register_and_dump(conn, self.settings, point)
            self._set_state("streaming", None)
            log.info("%s: streaming from %s", self.settings.source,
                     f"{point.file}:{point.position}" if point else "the server's first binlog")
            self._stream(conn, info, point)
        finally:
            conn.close()

    def _checked_point(self, point: ResumePoint | None) -> ResumePoint | None:
        """The resume point, refused before connecting when it names an unsafe file (a restart after
        a hostile ROTATE must not ask for it again), moved forward to ``start_file`` when that is a
        later file of the series (the way past a purged gap)."""
        for name, where in ((point.file if point else None, "the archive's last ROTATE event"),
                            (self.settings.start_file, "--start-file")):
            if name:
                try:
                    check_binlog_name(name, where)
                except ArchiveFileError as exc:
                    raise ArchiverFatalError(f"{self.settings.source}: {exc}") from None
        start = self.settings.start_file
        if point and start and _base_of(start) == _base_of(point.file) and \
                binlog_sort_key(start) > binlog_sort_key(point.file):
            log.warning("%s: skipping from %s to --start-file %s: the archive has a gap there", self.settings.source,
                        point.file, start)
            self.files.retire(point.file)
            return ResumePoint(start, 4)
        return point

    def _check_series(self, info: ServerInfo, point: ResumePoint | None) -> ResumePoint | None:
        """Refuse a server that is not the archived series' one (every session: the server may have
        failed over while we reconnected), or start a new series (``new_series``, once)."""
        identity = info.identity
        if identity is None:
            return point
        address = f"{self.settings.host}:{self.settings.port}"
        record = self.series
        wants_new = self.settings.new_series and not self._new_series_done
        if record is None:
            self.series, self._new_series_done = SeriesRecord(identity, address, time.time()), True
            if point is not None:
                log.warning("%s: no series record: recording %s as the server of the archived files",
                            self.settings.source, identity.describe())
            write_series(self.meta, self.series)
            return point
        if not wants_new and record.server.same_server(identity):
            return point
        if not wants_new:
            raise DifferentServerError(
                f"{self.settings.source}: the server {address} is {identity.describe()}, but the archive's series "
                f"was streamed from {record.describe()}: a failover, a rebuilt server or a different host. Its "
                f"binlogs are not the continuation of the archived ones{' (' + point.file + ')' if point else ''}; "
                "refusing to splice them. To archive this server as a new series, restart with --new-series "
                "(and --start-file NAME for where to start; files whose names are already archived are never "
                "overwritten)")
        return self._start_new_series(identity, address, record, point)

    def _start_new_series(self, identity: ServerIdentity, address: str, old: SeriesRecord,
                          point: ResumePoint | None) -> ResumePoint | None:
        if point is not None and point.position > 4:
            self.files.retire(point.file)  # the old series' open file stays as archived
        history = [*old.previous_series, {k: v for k, v in dataclasses.asdict(old).items() if k != "previous_series"}]
        self.series = SeriesRecord(identity, address, time.time(), previous_series=history)
        write_series(self.meta, self.series)
        self.files.base = _base_of(self.settings.start_file) if self.settings.start_file else None
        self._new_series_done = True
        log.warning("%s: --new-series: archiving %s as a new series from %s", self.settings.source,
                    identity.describe(), self.settings.start_file or "its first binlog")
        return ResumePoint(self.settings.start_file, 4) if self.settings.start_file else None

    def _stream(self, conn: pymysql.connections.Connection, info: ServerInfo, point: ResumePoint | None) -> None:
        decoder = rpl.DumpStreamDecoder()
        checksum_len = 4 if info.checksum.upper() == "CRC32" else 0
        while True:
            chunk = _read_chunk(conn)
            now = time.time()
            for item in decoder.feed(chunk):
                if isinstance(item, rpl.StreamError):
                    raise self._stream_error(item, point)
                if isinstance(item, rpl.StreamEnd):
                    self.files.flush(now, force=True)
                    self._report(now, force=True)
                    if self.settings.stop_at_end:
                        return
                    # a blocking dump only ends like this when the server shuts down: reconnect
                    raise ConnectionError("the server ended the binlog dump (EOF packet: shutting down?)")
                self._on_event(item, checksum_len, now)
            self._report(now)

    def _on_event(self, event: rpl.StreamEvent, checksum_len: int, now: float) -> None:
        p = self.progress
        if self._continues_gtid and not event.is_artificial and event.type_code in _CONTINUATION_TYPES:
            self._check_continuation(event, checksum_len, self._continues_gtid)
        if event.is_rotate and event.is_artificial:
            name, position = event.rotate_target(checksum_len)
            self.files.open(name, position)
            p.current_file, p.position = name, position
        elif event.type_code == EventType.FORMAT_DESCRIPTION and event.is_artificial:
            self._check_resumed_file(event)
        elif self.files.write(event, now):
            p.bytes_archived += event.event_size
            p.events_archived += 1
            p.position = event.log_pos
            p.last_event_timestamp = event.timestamp
            p.last_gtid = rpl.gtid_of(event) or p.last_gtid
            p.caught_up = False
            p.files_closed = self.files.files_closed
            if self.series is not None and not self.series.first_previous_gtids:
                self._note_series_start(event)
        elif event.is_heartbeat:
            p.caught_up = True

    def _check_resumed_file(self, event: rpl.StreamEvent) -> None:
        """The FDE a server re-sends when a dump resumes mid-file must be the archived file's own."""
        cur = self.files.current
        if cur is None or cur.fde is None or cur.size <= 4:
            return
        why = fde_mismatch(cur.fde, event.raw)
        if why:
            raise DifferentServerError(
                f"{self.settings.source}: {cur.name} on the server {self.settings.host}:{self.settings.port} is not "
                f"the archived {cur.name} ({cur.size} bytes archived): {why}. The server's binlogs were reset "
                "(RESET MASTER) or it is a different server; refusing to splice. Restart with --new-series "
                "(and --start-file NAME) to archive it as a new series")

    def _check_continuation(self, event: rpl.StreamEvent, checksum_len: int, last_gtid: str) -> None:
        self._continues_gtid = None  # checked once, at the new file's GTID state (or its first GTID)
        why = continuation_mismatch(event.raw, event.type_code, checksum_len, last_gtid)
        if why:
            name = self.progress.current_file
            self.files.abandon(name)  # the few bytes of it written so far: not the archive's
            raise DifferentServerError(
                f"{self.settings.source}: {name} on the server {self.settings.host}:{self.settings.port} does not "
                f"continue the archive (last archived GTID {last_gtid}): {why}. The server's binlogs were reset "
                "(RESET MASTER) or it is a different server; refusing to splice. Restart with --new-series "
                "(and --start-file NAME) to archive it as a new series")

    def _note_series_start(self, event: rpl.StreamEvent) -> None:
        """The first file's FORMAT_DESCRIPTION and PREVIOUS_GTIDS / GTID_LIST, into the series record."""
        record = self.series
        cur_name = self.progress.current_file
        if record is None or (record.first_file not in (None, cur_name)):
            return
        if event.type_code == EventType.FORMAT_DESCRIPTION and event.log_pos == event.event_size + 4:
            record.first_file, record.first_fde = cur_name, event.raw.hex()
            write_series(self.meta, record)
        elif event.type_code in (EventType.PREVIOUS_GTIDS, EventType.MARIA_GTID_LIST) and record.first_fde:
            record.first_previous_gtids = event.raw.hex()
            write_series(self.meta, record)

    def _report(self, now: float, force: bool = False) -> None:
        """Every second at most: fsync/upload when due, the lease, the status file; the progress log
        line (and the server's GTID position for the lag) every ``progress_interval_s``."""
        if not force and now - self._last_report < 1.0:
            return
        self.files.flush(now, force=force)
        self.lease.renew()
        if force or now - self._last_progress >= self.settings.progress_interval_s:
            self._last_progress = now
            self._refresh_server_gtid()
            p = self.progress
            log.info("%s: %s:%d archived %.1f MB / %d events (%.2f MB/s), lag %s s / %s GTIDs, %d files closed",
                     p.source, p.current_file, p.position, p.bytes_archived / 1e6, p.events_archived,
                     p.as_status(now)["mb_per_s"], _fmt(p.lag_seconds(now)), _fmt(p.lag_gtids()),
                     p.files_closed)
        self._last_report = now
        write_status(self.status_path, self.progress, now)

    def _refresh_server_gtid(self) -> None:
        """The server's GTID position over a short control connection (the dump one is busy)."""
        try:
            conn = connect(self.settings, self._password)
            try:
                self.progress.server_gtid_position = prepare_replica(conn, self.settings).gtid_position
            finally:
                conn.close()
        except pymysql.err.MySQLError as exc:
            log.debug("GTID position query failed: %s", exc)

    def _stream_error(self, err: rpl.StreamError, point: ResumePoint | None) -> BinlakeError:
        where = (f"{point.file} at byte {point.position}" if point
                 else (self.settings.start_file or "the first binlog"))
        if err.code != rpl.ER_MASTER_FATAL_ERROR_READING_BINLOG:
            return ArchiverError(f"{self.settings.source}: the server ended the binlog dump from {where}: "
                                 f"{err.message} (error {err.code})")
        first_file, first_state = self._oldest_binlog()
        last = point.last_gtid if point and point.last_gtid else self.progress.last_gtid
        return BinlogPurgedError(
            f"{self.settings.source}: the server {self.settings.host}:{self.settings.port} cannot stream "
            f"{where}, which the archive needs next (server error {err.code}: {err.message}). "
            f"Its oldest binlog is {first_file or 'unknown'}: the binlogs before it were purged. Missing GTIDs: "
            f"after {last or 'the archive start'} up to {first_state or 'the oldest binlog'}; the archive has a "
            f"gap there that discovery and reconciliation report. Restart with --start-file "
            f"{first_file or 'NAME (its oldest binlog, SHOW BINARY LOGS)'} to archive from what the server still has.")

    def _oldest_binlog(self) -> tuple[str | None, str | None]:
        """The server's oldest binlog and (MariaDB) the GTID state at its start; None where unknown."""
        first = state = None
        try:
            conn = connect(self.settings, self._password)
            try:
                with conn.cursor() as cur:
                    cur.execute("SHOW BINARY LOGS")
                    rows = cur.fetchall()
                    first = str(rows[0][0]) if rows else None
                    if first:
                        with contextlib.suppress(pymysql.err.MySQLError):  # MariaDB only
                            cur.execute("SELECT BINLOG_GTID_POS(%s, 4)", (first,))
                            state = str((cur.fetchone() or [None])[0] or "") or None
            finally:
                conn.close()
        except pymysql.err.MySQLError:
            pass
        return first, state


#: where a new file's GTID state shows (or, without one, its first transaction)
_CONTINUATION_TYPES = (EventType.PREVIOUS_GTIDS, EventType.MARIA_GTID_LIST, EventType.GTID, EventType.ANONYMOUS_GTID,
                       EventType.GTID_TAGGED, EventType.MARIA_GTID)


def _base_of(name: str) -> str | None:
    m = SAFE_BINLOG_NAME.match(name)
    return m.group("base") if m else None


def _short(value: object) -> str:
    text = str(value)
    return text if len(text) <= 120 else f"{text[:60]}... ({len(text)} characters)"


def _fmt(value: float | None) -> str:
    return "?" if value is None else (f"{value:.1f}" if isinstance(value, float) else str(value))
