"""binlake configuration: one TOML file validated into frozen pydantic dataclasses (one declaration).

Why one file: the same settings drive the in-process demo, the tests, the Airflow DAG and
spark-submit on a cluster; keeping them in one documented place (and never secrets) means a
deployment differs from the demo by that file alone. Credentials come from the standard AWS
chain (env vars, ~/.aws, instance/container roles) or an Airflow connection, never from here.

Why a schema (pydantic, unknown keys forbidden, strict types): a misspelled key (``warehous``,
``mod``) used to be ignored silently and a default took its place; now it is an error naming the
key, its section and the closest valid key, and a wrong type is one line, not a traceback.

Why pydantic *dataclasses* (declared once, below): the classes other modules use are the schema,
so a new key is one field in one place; they stay real frozen dataclasses, so
``dataclasses.replace(cfg, warehouse=...)`` keeps working (and re-validates). The file's layout
differs from the objects in two spots only, named in ``_PIPELINE_KEYS`` / ``_FILE_RENAMES``: the
``[pipeline]`` table holds top-level fields of :class:`BinlakeConfig`, and ``[spark.conf]`` is
``SparkSettings.extra_conf``.

Which file: explicit path argument > env ``BINLAKE_CONFIG`` > ``conf/binlake.toml`` of a source
checkout. An installed package without a checkout has no default file: the error says how to point
``BINLAKE_CONFIG`` at one, and ``binlake config --example`` prints a documented starting point.

Relative paths in the file are resolved from **the folder holding the file** (so a config can be
moved together with the folders it names; ``conf/binlake.toml`` says ``../.state``).

A few env vars override single fields (containers, tests), validated like the file's values:
``BINLAKE_WAREHOUSE``, ``BINLAKE_STATE_DIR``, ``BINLAKE_JARS_DIR``, ``BINLAKE_S3_ENDPOINT``,
``BINLAKE_SPARK_MASTER``, ``BINLAKE_SPARK_MODE``, ``BINLAKE_SPARK_JARS_ON_WORKERS`` and
``BINLAKE_SOURCES`` (``name=uri,name=uri``, replaces [[sources]]). pydantic-settings is not used for
them: its env source reads ``os.environ`` only (tests pass an explicit mapping) and its nested
naming (``BINLAKE_PIPELINE__WAREHOUSE``) would rename these documented variables.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import os
import re
import tomllib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.dataclasses import dataclass

from binlake.errors import BinlakeError
from binlake.lake.tables import gold_name_part

REPO_ROOT: Path = Path(__file__).resolve().parent.parent
DEFAULT_CONFIG_PATH: Path = REPO_ROOT / "conf" / "binlake.toml"
EXAMPLE_CONFIG_PATH: Path = Path(__file__).resolve().parent / "config_example.toml"

#: a source name: ASCII letter/digit runs joined by single '-', '_' or '.' (see SourceConfig)
_SOURCE_NAME = re.compile(r"[A-Za-z0-9]+(?:[-_.][A-Za-z0-9]+)*")
_URI_SCHEMES = ("s3://", "s3a://", "s3n://", "file://")
_DEFAULT_CREDENTIALS_PROVIDER = "software.amazon.awssdk.auth.credentials.DefaultCredentialsProvider"


class ConfigError(BinlakeError, ValueError):
    """The configuration file is missing, has an unknown key or a bad value (message names which)."""


def is_s3_uri(uri: str) -> bool:
    """True for s3://, s3a:// and s3n:// URIs (all the same store to binlake)."""
    return uri.startswith(("s3://", "s3a://", "s3n://"))


def split_s3_uri(uri: str) -> tuple[str, str]:
    """``s3a://bucket/a/b`` -> ``("bucket", "a/b")``."""
    if not is_s3_uri(uri):
        raise ConfigError(f"not an S3 URI: {uri!r}")
    rest = uri.split("://", 1)[1]
    bucket, _, key = rest.partition("/")
    if not bucket:
        raise ConfigError(f"S3 URI without bucket: {uri!r}")
    return bucket, key


def to_spark_uri(uri: str) -> str:
    """The URI Spark should use: s3:// and s3n:// become s3a:// (Hadoop's S3A connector)."""
    if uri.startswith(("s3://", "s3n://")):
        return "s3a://" + uri.split("://", 1)[1]
    return uri


def resolve_location(value: str, base: Path) -> str:
    """Object-store URIs stay as they are; local paths become absolute (relative to ``base``)."""
    if value.startswith(_URI_SCHEMES):
        if value.startswith("file://"):
            return str(Path(value[len("file://"):]).resolve())
        return value
    path = Path(os.path.expanduser(value))
    if not path.is_absolute():
        path = base / path
    return str(path.resolve())


# ---------------------------------------------------------------------------------------------
# The configuration, declared once: frozen pydantic dataclasses. Strict scalar types (a quoted
# "4" is not an integer), unknown keys rejected, dataclasses.replace() works and re-validates.
# ---------------------------------------------------------------------------------------------

_SCHEMA = ConfigDict(extra="forbid", defer_build=True)


def _conf_value_to_str(value: Any) -> Any:
    """``[spark.conf]`` values as Spark wants them: strings (``true``, not ``True``); tables stay
    tables, so the schema rejects them."""
    if isinstance(value, Mapping):
        return {k: (str(v).lower() if isinstance(v, bool) else str(v) if isinstance(v, int | float) else v)
                for k, v in value.items()}
    return value


SparkConf = Annotated[Mapping[StrictStr, StrictStr], BeforeValidator(_conf_value_to_str)]


@dataclass(frozen=True, config=_SCHEMA)
class SourceConfig:
    """One ``[[sources]]`` block: a MySQL/MariaDB server whose archived binlogs live under ``uri``."""

    name: StrictStr
    uri: StrictStr

    @field_validator("name")
    @classmethod
    def _name_is_an_identifier(cls, name: str) -> str:
        """Letters and digits in runs joined by single ``-``, ``_`` or ``.``.

        Why so strict: the name is a path component (leases, spool folders: ``.``/``..`` would
        climb out) and the first part of every gold table name ``<source>__<db>__<table>``. With
        no doubled separator and none at either end, the source's part ends exactly at the
        first ``__`` of a gold name, so two sources can only collide by sharing their part
        (``a-b`` and ``a_b``), which :meth:`BinlakeConfig._unique_names` rejects.
        """
        if not _SOURCE_NAME.fullmatch(name):
            if name and all(c.isascii() and (c.isalnum() or c in "-_.") for c in name):
                raise ValueError(f"source name {name!r} must start and end with a letter or digit and not "
                                 "repeat '-', '_' or '.' (gold table names join their parts with '__')")
            raise ValueError(f"source name {name!r} may only use letters, digits, '-', '_', '.'")
        return name


@dataclass(frozen=True, config=_SCHEMA)
class S3Settings:
    """``[s3]``: how to reach the object store. No secrets: credentials come from the AWS chain.

    In the file, ``path_style_access`` and ``ssl_enabled`` follow ``endpoint_url`` when unset
    (path style and plain HTTP for a custom ``http://`` endpoint); see :func:`_endpoint_defaults`.
    """

    endpoint_url: StrictStr | None = None
    region: StrictStr = "us-east-1"
    path_style_access: StrictBool = False
    aws_conn_id: StrictStr | None = None
    credentials_provider: StrictStr = _DEFAULT_CREDENTIALS_PROVIDER
    max_attempts: StrictInt = 5
    ssl_enabled: StrictBool = True


@dataclass(frozen=True, config=_SCHEMA)
class SparkSettings:
    """``[spark]``: SparkSession / spark-submit settings shared by local and cluster runs."""

    #: local: in-process SparkSession; submit: SparkSubmitOperator; connect: each step a Spark Connect
    #: client (in the task's process) of the server at ``remote`` (``binlake serve --connect``)
    mode: Literal["local", "submit", "connect"] = "local"
    remote: StrictStr = "sc://127.0.0.1:15002"  # connect mode: the Spark Connect server's address
    master: StrictStr = "local[2]"
    conn_id: StrictStr = "spark_default"
    driver_memory: StrictStr = "2g"
    shuffle_partitions: StrictInt = 4
    ui_enabled: StrictBool = True
    log_level: StrictStr = "WARN"
    jars_on_workers: StrictBool = False  # submit mode: jars dir mounted at the same path on every worker
    extra_conf: SparkConf = dataclasses.field(default_factory=dict)  # the file's [spark.conf] table


@dataclass(frozen=True, config=_SCHEMA)
class ArchiveSettings:
    """``[archive]`` (every source) and ``[archive.<source>]`` (one source): how ``binlake archive``
    connects to the server and writes the archive (docs/archiver.md). The destination is the
    source's ``[[sources]]`` uri; the password is never here (env or an Airflow connection)."""

    host: StrictStr = "127.0.0.1"
    port: StrictInt = Field(default=3306, ge=1, le=65535)
    user: StrictStr = "binlake"
    server_id: StrictInt = Field(default=4242, ge=1, le=0xFFFFFFFF)  # unique among the server's replicas
    spool_dir: StrictStr | None = None  # local copy of the open file; None: <state_dir>/archive-spool
    upload_bytes: StrictInt = Field(default=8 << 20, ge=1)  # re-upload the open file after this many bytes
    upload_interval_s: StrictFloat = Field(default=10.0, ge=0)  # ... or after this many seconds
    fsync_interval_s: StrictFloat = Field(default=1.0, ge=0)  # fsync at a transaction end at most this often
    heartbeat_s: StrictFloat = Field(default=5.0, gt=0)  # the server's heartbeat period on an idle stream
    progress_interval_s: StrictFloat = Field(default=30.0, gt=0)
    read_timeout_s: StrictFloat | None = None  # None: 4 heartbeats (at least 10 s)
    reconnect_attempts: StrictInt = Field(default=10, ge=1)
    start_file: StrictStr | None = None  # first binlog of an empty archive (None: the server's oldest)
    start_gtid: StrictStr | None = None  # ... or the file holding this GTID position
    stop_at_end: StrictBool = False  # stop at the server's last event instead of waiting for more
    ssl_mode: Literal["preferred", "required", "disabled"] = "preferred"  # as MySQL's --ssl-mode
    ssl_ca: StrictStr | None = None
    ssl_cert: StrictStr | None = None
    ssl_key: StrictStr | None = None
    ssl_verify_identity: StrictBool | None = None  # None: verify the host name when ssl_ca is set
    airflow_conn_id: StrictStr | None = None  # host, port, user and password from this Airflow connection


def _union_entry(value: Any) -> Any:
    """``name = "shop.orders"`` is short for ``name = { table = "shop.orders" }``."""
    return {"table": value} if isinstance(value, str) else value


@dataclass(frozen=True, config=_SCHEMA)
class GoldUnion:
    """One ``[gold.union]`` entry: the source table ``table`` (``db.table``, case-insensitive) of every
    source, or of ``sources`` only (one fleet of shards), stacked in one gold table with ``_source``."""

    table: StrictStr
    sources: tuple[StrictStr, ...] | None = None  # None: every source that has the table

    @field_validator("table")
    @classmethod
    def _db_dot_table(cls, table: str) -> str:
        db, dot, name = table.partition(".")
        if not (db and dot and name) or "." in name:
            raise ValueError(f"expected db.table, got {table!r}")
        return table


#: a union table's name: lower-case words joined by single underscores, so it never equals a
#: per-source ``<source>__<db>__<table>`` name (always holding ``__``) nor a ``__history`` one
_UNION_NAME = re.compile(r"[a-z0-9]+(_[a-z0-9]+)*")


@dataclass(frozen=True, config=_SCHEMA)
class GoldSettings:
    """``[gold]``: the typed current-state tables (docs/gold.md). ``history``: keep an SCD2
    ``gold.<name>__history`` for every table; ``history_tables``: ... or for these
    ``db.table`` names only (case-insensitive). ``seed_dumps``: source name -> a local dump file
    (``mariadb-dump --single-transaction --master-data=2 --gtid --hex-blob``) that seeds its tables.
    ``union``: ``gold.<name>`` -> the source table whose per-source gold tables it stacks (a fleet
    of shards with one schema), key (``_source``, primary key)."""

    history: StrictBool = False
    history_tables: tuple[StrictStr, ...] = ()
    seed_dumps: Mapping[StrictStr, StrictStr] = dataclasses.field(default_factory=dict)
    union: Mapping[StrictStr, Annotated[GoldUnion, BeforeValidator(_union_entry)]] = dataclasses.field(
        default_factory=dict)
    #: gold tables keep Delta's change data feed (``table_changes`` / ``readChangeFeed``: a night's net changes)
    change_data_feed: StrictBool = True
    #: gold MERGEs mark deleted and updated rows in deletion vectors instead of rewriting whole files;
    #: off by default: delta-rs 1.6's Arrow reader (``binlake sql`` without a JVM) refuses such tables
    deletion_vectors: StrictBool = False
    #: a table with fewer row changes than this in silver is replayed in full every run, even where the
    #: incremental path is exact (its fixed cost is more than replaying a small table); 0: always incremental
    incremental_min_changes: StrictInt = Field(default=50_000, ge=0)
    #: a full replay fed by at most this many row changes runs in the gold step's own process (its
    #: stream read and its rows written with delta-rs) instead of as a Spark job over silver; 0: never
    in_process_changes: StrictInt = Field(default=50_000, ge=0)

    @field_validator("union")
    @classmethod
    def _union_names(cls, union: Mapping[str, GoldUnion]) -> Mapping[str, GoldUnion]:
        for name in union:
            if not _UNION_NAME.fullmatch(name):
                raise ValueError(f"union table name {name!r}: use lower-case letters, digits and single '_' "
                                 "(a '__' would read as a per-source gold table name)")
        return union

    def keeps_history(self, db: str, table: str) -> bool:
        """Whether ``db.table`` gets a ``__history`` table."""
        return self.history or f"{db}.{table}".casefold() in {t.casefold() for t in self.history_tables}

    def unions_of(self, source: str, db: str, table: str) -> tuple[str, ...]:
        """The union tables that stack ``source``'s ``db.table`` (sorted names)."""
        wanted = f"{db}.{table}".casefold()
        return tuple(sorted(name for name, u in self.union.items()
                            if u.table.casefold() == wanted and (u.sources is None or source in u.sources)))


@dataclass(frozen=True, config=_SCHEMA)
class MaintenanceSettings:
    """``[maintenance]``: the ``binlake_maintenance`` DAG (docs/maintenance.md). ``cron``: its own
    schedule; a table is compacted when one of its partitions holds at least ``min_files`` data
    files smaller than ``target_file_mb``; ``vacuum_retention_hours``: how long removed files stay
    readable, refused when shorter than ``max_run_hours`` (the longest a pipeline run may read
    one table version) or the run lease's life; a checkpoint is written after
    ``checkpoint_every`` commits without one."""

    cron: StrictStr = "0 5 * * 0"
    min_files: StrictInt = Field(default=16, ge=2)
    target_file_mb: StrictInt = Field(default=128, ge=1)
    vacuum_retention_hours: StrictInt = Field(default=168, ge=0)
    max_run_hours: StrictFloat = Field(default=24.0, gt=0)
    checkpoint_every: StrictInt = Field(default=10, ge=1)


@dataclass(frozen=True, config=_SCHEMA)
class LineageSettings:
    """``[lineage]``: OpenLineage events of the DAG tasks and the Spark jobs (docs/lineage.md).
    ``transport``: ``file`` (JSON lines under ``file_dir``, default ``<state_dir>/lineage``),
    ``console`` (the task log) or ``http`` (Marquez or any OpenLineage endpoint at ``url``);
    ``spark``: the Spark listener too; ``namespace``: the jobs' namespace."""

    enabled: StrictBool = True
    transport: Literal["file", "console", "http"] = "file"
    file_dir: StrictStr | None = None
    url: StrictStr | None = None
    endpoint: StrictStr = "api/v1/lineage"
    namespace: StrictStr = "binlake"
    spark: StrictBool = True

    @model_validator(mode="after")
    def _http_has_url(self) -> LineageSettings:
        if self.enabled and self.transport == "http" and not self.url:
            raise ValueError('[lineage] transport = "http" needs url (e.g. "http://marquez:5000")')
        return self


@dataclass(frozen=True, config=_SCHEMA)
class ArchiveConfig:
    """The ``[archive]`` table: keys for every source, and ``[archive.<source>]`` tables that
    override them for one source (already merged: ``per_source[name]`` is complete)."""

    defaults: ArchiveSettings = ArchiveSettings()
    per_source: Mapping[StrictStr, ArchiveSettings] = dataclasses.field(default_factory=dict)

    def for_source(self, name: str) -> ArchiveSettings:
        """The settings of source ``name``: its own table if it has one, else the defaults."""
        return self.per_source.get(name, self.defaults)


@dataclass(frozen=True, config=_SCHEMA)
class BinlakeConfig:
    """The whole configuration. Local paths are absolute after :func:`load_config`.

    ``warehouse`` .. ``on_replaced_object`` are the file's ``[pipeline]`` table; ``archive`` is None when
    the file has no ``[archive]`` table.
    """

    sources: tuple[SourceConfig, ...] = ()
    warehouse: StrictStr = ".state/warehouse"
    state_dir: StrictStr = ".state"
    jars_dir: StrictStr = ".jars"
    nightly_cron: StrictStr = "0 2 * * *"
    #: an ingested object listed again with another etag/size: ingest it again or fail (discovery)
    on_replaced_object: Literal["reingest", "fail"] = "reingest"
    #: how many busy sources share one task per step (the DAGs' mapped group maps over batches of
    #: this many): 1 gives each source its own tasks; more makes a night of many small sources cost
    #: a few task processes (and Spark sessions) per step instead of a few per source
    sources_per_task: StrictInt = Field(default=1, ge=1)
    #: a decode step whose new files total at most this many bytes decodes them in the step's own
    #: process (the same decoder, its rows committed by delta-rs) instead of on Spark's executors,
    #: starting no JVM; 0: always Spark (docs/architecture.md, "Where the JVM starts")
    decode_in_process_bytes: StrictInt = Field(default=64 << 20, ge=0)
    s3: S3Settings = S3Settings()
    spark: SparkSettings = SparkSettings()
    config_path: StrictStr | None = None
    archive: ArchiveConfig | None = None
    gold: GoldSettings = GoldSettings()
    maintenance: MaintenanceSettings = MaintenanceSettings()
    lineage: LineageSettings = LineageSettings()

    @field_validator("sources")
    @classmethod
    def _unique_names(cls, sources: tuple[SourceConfig, ...]) -> tuple[SourceConfig, ...]:
        """Unique names, and unique gold prefixes: ``a-b`` and ``a_b`` would write one gold table
        each (``gold.a_b__<db>__<table>``) and each source's gold step delete the other's rows."""
        seen: set[str] = set()
        prefixes: dict[str, str] = {}
        for src in sources:
            if src.name in seen:
                raise ValueError(f"duplicate source name {src.name!r}")
            seen.add(src.name)
            prefix = gold_name_part(src.name)
            if prefix in prefixes:
                raise ValueError(f"sources {prefixes[prefix]!r} and {src.name!r} share the gold table prefix "
                                 f"'gold.{prefix}__' (gold names are lower-case, '-' and '.' become '_'): "
                                 "rename one")
            prefixes[prefix] = src.name
        return sources

    @model_validator(mode="after")
    def _archive_tables_name_sources(self) -> BinlakeConfig:
        names = [s.name for s in self.sources]
        for name in (self.archive.per_source if self.archive else {}):
            if name not in names:
                close = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
                hint = f": did you mean [archive.{close[0]}]?" if close else f" (sources: {', '.join(names) or 'none'})"
                raise ValueError(f"[archive.{name}] names no [[sources]] entry{hint}")
        return self

    @model_validator(mode="after")
    def _unions_name_sources(self) -> BinlakeConfig:
        names = [s.name for s in self.sources]
        for union, spec in self.gold.union.items():
            unknown = [s for s in spec.sources or () if s not in names]
            if unknown:
                raise ValueError(f"[gold.union] {union}: sources {unknown} name no [[sources]] entry "
                                 f"(sources: {', '.join(names) or 'none'})")
        return self

    def source(self, name: str) -> SourceConfig:
        """The source called ``name`` (KeyError if unknown)."""
        for src in self.sources:
            if src.name == name:
                return src
        raise KeyError(name)


# ---------------------------------------------------------------------------------------------
# The file's layout where it differs from the objects above, and readable errors.
# ---------------------------------------------------------------------------------------------

#: the ``[pipeline]`` table's keys: top-level fields of BinlakeConfig
_PIPELINE_KEYS: tuple[str, ...] = ("warehouse", "state_dir", "jars_dir", "nightly_cron", "on_replaced_object",
                                   "sources_per_task", "decode_in_process_bytes")
#: file key -> field name, per section
_FILE_RENAMES: dict[str, dict[str, str]] = {"spark": {"conf": "extra_conf"}}
_FILE_SECTIONS: tuple[str, ...] = ("pipeline", "sources", "s3", "spark", "archive", "gold", "maintenance",
                                   "lineage")
_UNKNOWN = ("extra_forbidden", "unexpected_keyword_argument")


def _file_keys(section: str) -> list[str]:
    """The keys a file may use in ``section`` (``""``: the top level)."""
    if not section:
        return list(_FILE_SECTIONS)
    if section == "pipeline":
        return list(_PIPELINE_KEYS)
    if section == "gold.union":
        return [f.name for f in dataclasses.fields(GoldUnion)]
    model = {"sources": SourceConfig, "s3": S3Settings, "spark": SparkSettings, "archive": ArchiveSettings,
             "gold": GoldSettings, "maintenance": MaintenanceSettings, "lineage": LineageSettings}[section]
    back = {v: k for k, v in _FILE_RENAMES.get(section, {}).items()}
    return [back.get(f.name, f.name) for f in dataclasses.fields(model)]


def _file_to_fields(raw: Mapping[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The file's tables -> BinlakeConfig's field values, plus errors for keys with no field."""
    fields: dict[str, Any] = {}
    errors: list[dict[str, Any]] = []
    for key, value in raw.items():
        if key not in _FILE_SECTIONS:
            errors.append({"type": "extra_forbidden", "loc": (key,), "msg": "unknown", "input": value})
        elif key == "pipeline" and isinstance(value, Mapping):
            for name, item in value.items():
                if name in _PIPELINE_KEYS:
                    fields[name] = item
                else:
                    errors.append({"type": "extra_forbidden", "loc": ("pipeline", name), "msg": "", "input": item})
        elif key == "pipeline":
            errors.append({"type": "model_type", "loc": ("pipeline",), "msg": "", "input": value})
        elif key == "archive" and isinstance(value, Mapping):
            defaults = {k: v for k, v in value.items() if not isinstance(v, Mapping)}
            fields[key] = {"defaults": defaults, "per_source": {
                name: {**defaults, **table} for name, table in value.items() if isinstance(table, Mapping)}}
        elif key in _FILE_RENAMES and isinstance(value, Mapping):
            renames, table = _FILE_RENAMES[key], {}
            for name, item in value.items():
                if name in renames.values():  # the field's own name is not a file key
                    errors.append({"type": "extra_forbidden", "loc": (key, name), "msg": "", "input": item})
                else:
                    table[renames.get(name, name)] = item
            fields[key] = table
        else:
            fields[key] = value
    return fields, errors


def _file_loc(loc: tuple[int | str, ...], raw: Mapping[str, Any]) -> tuple[int | str, ...] | None:
    """Where a field error is in the file (``warehouse`` -> ``pipeline.warehouse``); None when the
    error repeats one already reported (an ``[archive]`` key inherited by ``[archive.<source>]``)."""
    if loc and loc[0] in _PIPELINE_KEYS:
        return ("pipeline", *loc)
    if len(loc) >= 2 and loc[0] in _FILE_RENAMES:
        back = {v: k for k, v in _FILE_RENAMES[str(loc[0])].items()}
        return (loc[0], back.get(str(loc[1]), loc[1]), *loc[2:])
    if len(loc) >= 2 and loc[0] == "archive" and loc[1] == "defaults":
        return ("archive", *loc[2:])
    if len(loc) >= 4 and loc[0] == "archive" and loc[1] == "per_source":
        table = raw.get("archive", {}).get(loc[2], {})
        return ("archive", *loc[2:]) if not loc[3:] or loc[3] in table else None
    return loc


_TYPE_WORDS = {
    "int_type": "an integer", "string_type": "a string", "bool_type": "true or false",
    "float_type": "a number", "dict_type": "a table", "list_type": "a list of [[...]] blocks",
    "tuple_type": "a list of [[...]] blocks", "model_type": "a table", "dataclass_type": "a table",
    "int_from_float": "an integer",
}


def _where(loc: tuple[int | str, ...]) -> str:
    """``('sources', 0, 'name')`` -> ``sources[0].name``."""
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _unknown_key_message(loc: tuple[int | str, ...]) -> str:
    key = str(loc[-1])
    parent = tuple(p for p in loc[:-1] if not isinstance(p, int))
    valid = _file_keys("gold.union" if parent[:2] == ("gold", "union") and len(parent) == 3
                       else str(parent[0]) if parent else "")
    if not parent:
        message = f"unknown section or key {key!r} at the top level"
    else:
        message = f"unknown key {key!r} in [{_where(loc[:-1])}]"
    close = difflib.get_close_matches(key, valid, n=1, cutoff=0.6)
    if close:
        return f"{message}: did you mean {close[0]!r}?"
    homes = [name for name in _FILE_SECTIONS if name != "sources" and key in _file_keys(name)]
    if homes:
        return f"{message}: {key!r} belongs in [{homes[0]}]"
    return f"{message} (valid: {', '.join(valid)})"


def _error_line(error: Mapping[str, Any]) -> str:
    """One readable line for one pydantic error (no pydantic URL, no 'Input should be')."""
    loc = tuple(error["loc"])
    kind = str(error["type"])
    if kind in _UNKNOWN:
        return _unknown_key_message(loc)
    where = _where(loc)
    if not where:
        return str(error.get("ctx", {}).get("error", error["msg"]))
    if kind in ("missing", "missing_argument"):
        return f"{where}: required key is missing"
    if kind == "value_error":
        return f"{where}: {error.get('ctx', {}).get('error', error['msg'])}"
    if kind == "literal_error":
        return f"{where}: expected {error['ctx']['expected']}, got {error['input']!r}"
    wanted = _TYPE_WORDS.get(kind)
    if wanted:
        return f"{where}: expected {wanted}, got {error['input']!r}"
    return f"{where}: {error['msg']}"


def _file_errors(raw: Mapping[str, Any], pre: list[dict[str, Any]],
                 exc: ValidationError | None) -> Iterator[dict[str, Any]]:
    """The pre-check's errors and pydantic's, located in the file's terms, repeats dropped."""
    yield from pre
    for err in exc.errors() if exc else []:
        loc = _file_loc(tuple(err["loc"]), raw)
        if loc is not None:
            yield {**err, "loc": loc}


def validate_config_file(raw: Mapping[str, Any], origin: str = "config") -> BinlakeConfig:
    """Validate parsed TOML against the schema; ConfigError lists each problem on one line.

    Relative paths stay relative here (:func:`config_from_dict` anchors them)."""
    fields, pre = _file_to_fields(_endpoint_defaults(raw))
    cfg: BinlakeConfig | None = None
    exc: ValidationError | None = None
    try:
        cfg = _config_adapter().validate_python(fields)
    except ValidationError as err:
        exc = err
    if cfg is not None and not pre:
        return cfg
    errors = list(_file_errors(raw, pre, exc))
    lines = list(dict.fromkeys(_error_line(e) for e in errors if not _explained_by_a_typo(e, errors)))
    raise ConfigError(f"{origin}: " + f"\n{origin}: ".join(lines))


@functools.cache
def _config_adapter() -> TypeAdapter[BinlakeConfig]:
    """The whole schema's validator, built on first use: with ``defer_build`` each section's own
    validator is built only if something validates that section alone (``dataclasses.replace``),
    which a one-shot ``binlake sql`` never does."""
    return TypeAdapter(BinlakeConfig)


def _endpoint_defaults(raw: Mapping[str, Any]) -> Mapping[str, Any]:
    """``[s3]`` defaults that follow the endpoint: a custom endpoint means path-style requests, an
    ``http://`` one plain HTTP (MinIO, moto); AWS itself (no endpoint) neither."""
    s3 = raw.get("s3", {})
    if not isinstance(s3, Mapping):
        return raw
    endpoint = s3.get("endpoint_url") or None
    if endpoint is not None and not isinstance(endpoint, str):
        return raw
    filled = {"path_style_access": endpoint is not None,
              "ssl_enabled": not (endpoint or "").startswith("http://"), **s3}
    if "endpoint_url" in filled and not filled["endpoint_url"]:
        filled["endpoint_url"] = None
    aws_conn = filled.get("aws_conn_id")
    if aws_conn == "":
        filled["aws_conn_id"] = None
    return {**raw, "s3": filled}


def _explained_by_a_typo(error: Mapping[str, Any], errors: list[Any]) -> bool:
    """A missing key whose misspelling is reported next to it (``url`` for ``uri``) adds nothing."""
    if error["type"] not in ("missing", "missing_argument"):
        return False
    loc = tuple(error["loc"])
    for other in errors:
        other_loc = tuple(other["loc"])
        if (other["type"] in _UNKNOWN and other_loc[:-1] == loc[:-1]
                and difflib.get_close_matches(str(other_loc[-1]), [str(loc[-1])], n=1, cutoff=0.6)):
            return True
    return False


# env var -> (section, key) in the file's terms; BINLAKE_SOURCES is handled apart (it replaces a list).
_ENV_OVERRIDES: dict[str, tuple[str, str]] = {
    "BINLAKE_WAREHOUSE": ("pipeline", "warehouse"),
    "BINLAKE_STATE_DIR": ("pipeline", "state_dir"),
    "BINLAKE_JARS_DIR": ("pipeline", "jars_dir"),
    "BINLAKE_S3_ENDPOINT": ("s3", "endpoint_url"),
    "BINLAKE_SPARK_MASTER": ("spark", "master"),
    "BINLAKE_SPARK_MODE": ("spark", "mode"),
    "BINLAKE_SPARK_REMOTE": ("spark", "remote"),
    "BINLAKE_SPARK_JARS_ON_WORKERS": ("spark", "jars_on_workers"),
}


def parse_sources_env(value: str) -> list[dict[str, str]]:
    """``"a=s3://bucket/a/,b=/data/b"`` -> ``[{"name": "a", "uri": ...}, ...]`` (for containers)."""
    out: list[dict[str, str]] = []
    for part in value.split(","):
        part = part.strip()
        if not part:
            continue
        name, sep, uri = part.partition("=")
        if not sep:
            raise ConfigError(f"BINLAKE_SOURCES entry {part!r} is not name=uri")
        out.append({"name": name.strip(), "uri": uri.strip()})
    return out


def _with_env_overrides(raw: Mapping[str, Any], env: Mapping[str, str]) -> dict[str, Any]:
    """A copy of ``raw`` with the BINLAKE_* env overrides written into their sections."""
    merged: dict[str, Any] = {key: (dict(value) if isinstance(value, Mapping) else value)
                              for key, value in raw.items()}
    for var, (section, key) in _ENV_OVERRIDES.items():
        value: str | bool | None = env.get(var)
        if not value:
            continue
        if key == "jars_on_workers":
            value = str(value).lower() in ("1", "true", "yes")
        table = merged.setdefault(section, {})
        if isinstance(table, dict):
            table[key] = value
    if env.get("BINLAKE_SOURCES"):
        merged["sources"] = parse_sources_env(env["BINLAKE_SOURCES"])
    return merged


def _anchor_archive(archive: ArchiveConfig | None, base: Path, state_dir: str) -> ArchiveConfig | None:
    """The archiver's spool folders anchored like every other path (default: under state_dir)."""
    if archive is None:
        return None

    def anchored(settings: ArchiveSettings) -> ArchiveSettings:
        spool = settings.spool_dir
        return dataclasses.replace(settings, spool_dir=resolve_location(spool, base) if spool
                                   else str(Path(state_dir) / "archive-spool"))

    return ArchiveConfig(defaults=anchored(archive.defaults),
                         per_source={name: anchored(s) for name, s in archive.per_source.items()})


def _resolve(cfg: BinlakeConfig, base: Path, config_path: str | None) -> BinlakeConfig:
    """Local paths absolute (anchored at ``base``), S3 prefixes ending in '/'."""
    sources = []
    for src in cfg.sources:
        uri = resolve_location(src.uri, base)
        if is_s3_uri(uri) and not uri.endswith("/"):
            uri += "/"
        sources.append(dataclasses.replace(src, uri=uri))
    state_dir = resolve_location(cfg.state_dir, base)
    return dataclasses.replace(
        cfg, sources=tuple(sources), warehouse=resolve_location(cfg.warehouse, base).rstrip("/"),
        state_dir=state_dir, jars_dir=resolve_location(cfg.jars_dir, base), config_path=config_path,
        archive=_anchor_archive(cfg.archive, base, state_dir),
        lineage=dataclasses.replace(cfg.lineage, file_dir=resolve_location(
            cfg.lineage.file_dir or str(Path(state_dir) / "lineage"), base)))


def config_from_dict(raw: Mapping[str, Any], base: Path, config_path: str | None = None,
                     env: Mapping[str, str] | None = None) -> BinlakeConfig:
    """Build a :class:`BinlakeConfig` from parsed TOML (``base`` anchors relative paths)."""
    env = os.environ if env is None else env
    file = validate_config_file(_with_env_overrides(raw, env), origin=config_path or "config")
    return _resolve(file, base, config_path)


def config_path_from_env(path: str | os.PathLike[str] | None = None) -> Path:
    """The config file to use: ``path`` > ``$BINLAKE_CONFIG`` > the checkout's ``conf/binlake.toml``."""
    if path is not None:
        return Path(path)
    env_path = os.environ.get("BINLAKE_CONFIG")
    if env_path:
        return Path(env_path)
    if DEFAULT_CONFIG_PATH.is_file():
        return DEFAULT_CONFIG_PATH
    raise ConfigError(
        "no binlake config file: set BINLAKE_CONFIG=/path/to/binlake.toml (or pass --config PATH); "
        "`binlake config --example > binlake.toml` writes a documented starting point")


def read_toml(path: Path) -> dict[str, Any]:
    """Parse ``path``; a syntax error names the file, line and column (tomllib's own words)."""
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None


def load_config(path: str | os.PathLike[str] | None = None,
                env: Mapping[str, str] | None = None) -> BinlakeConfig:
    """Load and validate the config file; relative paths are anchored at the file's own folder."""
    cfg_path = config_path_from_env(path).resolve()
    if not cfg_path.is_file():
        raise ConfigError(f"config file not found: {cfg_path} "
                          "(set BINLAKE_CONFIG=/path/to/binlake.toml or pass --config PATH)")
    env_map = os.environ if env is None else env
    return config_from_dict(read_toml(cfg_path), base=cfg_path.parent, config_path=str(cfg_path), env=env_map)
