"""binlake configuration: one TOML file (conf/binlake.toml) loaded into dataclasses.

Why one file: the same settings drive the in-process demo, the tests, the Airflow DAG and
spark-submit on a cluster; keeping them in one documented place (and never secrets) means a
deployment differs from the demo by that file alone. Credentials come from the standard AWS
chain (env vars, ~/.aws, instance/container roles) or an Airflow connection, never from here.

Lookup order for the file: explicit path argument > env ``BINLAKE_CONFIG`` > ``<repo>/conf/binlake.toml``.
A few env vars override single fields (handy for containers and tests): ``BINLAKE_WAREHOUSE``,
``BINLAKE_STATE_DIR``, ``BINLAKE_JARS_DIR``, ``BINLAKE_S3_ENDPOINT``, ``BINLAKE_SPARK_MASTER``,
``BINLAKE_SPARK_MODE``, ``BINLAKE_SPARK_JARS_ON_WORKERS`` and ``BINLAKE_SOURCES`` (``name=uri,name=uri``, replaces [[sources]]).
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

REPO_ROOT: Path = Path(__file__).resolve().parent.parent
DEFAULT_CONFIG_PATH: Path = REPO_ROOT / "conf" / "binlake.toml"

_URI_SCHEMES = ("s3://", "s3a://", "s3n://", "file://")


class ConfigError(ValueError):
    """The configuration file is missing a field or has a bad value."""


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


@dataclass(frozen=True)
class SourceConfig:
    """One MySQL/MariaDB server whose archived binlogs live under ``uri`` (a prefix or folder)."""

    name: str
    uri: str


@dataclass(frozen=True)
class S3Settings:
    """How to reach the object store. No secrets: credentials come from the AWS chain."""

    endpoint_url: str | None = None
    region: str = "us-east-1"
    path_style_access: bool = False
    aws_conn_id: str | None = None
    credentials_provider: str = "software.amazon.awssdk.auth.credentials.DefaultCredentialsProvider"
    max_attempts: int = 5
    ssl_enabled: bool = True


@dataclass(frozen=True)
class SparkSettings:
    """SparkSession / spark-submit settings shared by local and cluster runs."""

    mode: str = "local"  # "local": in-process SparkSession; "submit": SparkSubmitOperator
    master: str = "local[2]"
    conn_id: str = "spark_default"
    driver_memory: str = "2g"
    shuffle_partitions: int = 4
    ui_enabled: bool = True
    log_level: str = "WARN"
    jars_on_workers: bool = False  # submit mode: jars dir mounted at the same path on every worker
    extra_conf: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class BinlakeConfig:
    """The whole configuration. Local paths are absolute after loading."""

    sources: tuple[SourceConfig, ...]
    warehouse: str
    state_dir: str
    jars_dir: str
    nightly_cron: str
    s3: S3Settings
    spark: SparkSettings
    config_path: str | None = None

    def source(self, name: str) -> SourceConfig:
        """The source called ``name`` (KeyError if unknown)."""
        for src in self.sources:
            if src.name == name:
                return src
        raise KeyError(name)


def _get(table: Mapping[str, Any], key: str, typ: type, default: Any, where: str) -> Any:
    value = table.get(key, default)
    if value is None:
        return None
    if typ is float and isinstance(value, int):
        value = float(value)
    if not isinstance(value, typ) or (typ is int and isinstance(value, bool)):
        raise ConfigError(f"{where}.{key}: expected {typ.__name__}, got {value!r}")
    return value


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


def config_from_dict(raw: Mapping[str, Any], base: Path, config_path: str | None = None,
                     env: Mapping[str, str] | None = None) -> BinlakeConfig:
    """Build a :class:`BinlakeConfig` from parsed TOML (``base`` anchors relative paths)."""
    env = os.environ if env is None else env
    pipeline = raw.get("pipeline", {})
    s3_raw = raw.get("s3", {})
    spark_raw = raw.get("spark", {})

    sources: list[SourceConfig] = []
    seen: set[str] = set()
    raw_sources = raw.get("sources", [])
    if env.get("BINLAKE_SOURCES"):
        raw_sources = parse_sources_env(env["BINLAKE_SOURCES"])
    for i, item in enumerate(raw_sources):
        where = f"sources[{i}]"
        name = _get(item, "name", str, None, where)
        uri = _get(item, "uri", str, None, where)
        if not name or not uri:
            raise ConfigError(f"{where}: 'name' and 'uri' are required")
        if name in seen:
            raise ConfigError(f"{where}: duplicate source name {name!r}")
        if not all(c.isalnum() or c in "-_." for c in name):
            raise ConfigError(f"{where}: source name {name!r} may only use letters, digits, '-', '_', '.'")
        seen.add(name)
        uri = resolve_location(uri, base)
        if is_s3_uri(uri) and not uri.endswith("/"):
            uri += "/"
        sources.append(SourceConfig(name=name, uri=uri))

    endpoint = env.get("BINLAKE_S3_ENDPOINT") or _get(s3_raw, "endpoint_url", str, None, "s3") or None
    s3 = S3Settings(
        endpoint_url=endpoint,
        region=_get(s3_raw, "region", str, "us-east-1", "s3"),
        path_style_access=_get(s3_raw, "path_style_access", bool, endpoint is not None, "s3"),
        aws_conn_id=_get(s3_raw, "aws_conn_id", str, None, "s3") or None,
        credentials_provider=_get(s3_raw, "credentials_provider", str, S3Settings.credentials_provider, "s3"),
        max_attempts=_get(s3_raw, "max_attempts", int, 5, "s3"),
        ssl_enabled=_get(s3_raw, "ssl_enabled", bool, not (endpoint or "").startswith("http://"), "s3"),
    )

    mode = env.get("BINLAKE_SPARK_MODE") or _get(spark_raw, "mode", str, "local", "spark")
    if mode not in ("local", "submit"):
        raise ConfigError(f"spark.mode must be 'local' or 'submit', got {mode!r}")
    extra = spark_raw.get("conf", {})
    if not isinstance(extra, Mapping):
        raise ConfigError("spark.conf must be a table of key = \"value\" pairs")
    spark = SparkSettings(
        mode=mode,
        master=env.get("BINLAKE_SPARK_MASTER") or _get(spark_raw, "master", str, "local[2]", "spark"),
        conn_id=_get(spark_raw, "conn_id", str, "spark_default", "spark"),
        driver_memory=_get(spark_raw, "driver_memory", str, "2g", "spark"),
        shuffle_partitions=_get(spark_raw, "shuffle_partitions", int, 4, "spark"),
        ui_enabled=_get(spark_raw, "ui_enabled", bool, True, "spark"),
        log_level=_get(spark_raw, "log_level", str, "WARN", "spark"),
        jars_on_workers=(env.get("BINLAKE_SPARK_JARS_ON_WORKERS", "").lower() in ("1", "true", "yes")
                         or _get(spark_raw, "jars_on_workers", bool, False, "spark")),
        extra_conf={str(k): str(v) for k, v in extra.items()},
    )

    warehouse = env.get("BINLAKE_WAREHOUSE") or _get(pipeline, "warehouse", str, ".state/warehouse", "pipeline")
    state_dir = env.get("BINLAKE_STATE_DIR") or _get(pipeline, "state_dir", str, ".state", "pipeline")
    jars_dir = env.get("BINLAKE_JARS_DIR") or _get(pipeline, "jars_dir", str, ".jars", "pipeline")
    return BinlakeConfig(
        sources=tuple(sources),
        warehouse=resolve_location(warehouse, base).rstrip("/"),
        state_dir=resolve_location(state_dir, base),
        jars_dir=resolve_location(jars_dir, base),
        nightly_cron=_get(pipeline, "nightly_cron", str, "0 2 * * *", "pipeline"),
        s3=s3,
        spark=spark,
        config_path=config_path,
    )


def config_path_from_env(path: str | os.PathLike[str] | None = None) -> Path:
    """The config file to use: ``path`` > ``$BINLAKE_CONFIG`` > ``conf/binlake.toml``."""
    if path is not None:
        return Path(path)
    env_path = os.environ.get("BINLAKE_CONFIG")
    return Path(env_path) if env_path else DEFAULT_CONFIG_PATH


def load_config(path: str | os.PathLike[str] | None = None,
                env: Mapping[str, str] | None = None) -> BinlakeConfig:
    """Load and validate the config file.

    Relative paths in the file are anchored at ``$BINLAKE_HOME`` when set, else at the parent of
    the folder holding the file (so ``conf/binlake.toml`` resolves ``.state`` to ``<repo>/.state``).
    """
    cfg_path = config_path_from_env(path).resolve()
    if not cfg_path.is_file():
        raise ConfigError(f"config file not found: {cfg_path}")
    with cfg_path.open("rb") as fh:
        raw = tomllib.load(fh)
    env_map = os.environ if env is None else env
    home = env_map.get("BINLAKE_HOME")
    base = Path(home).resolve() if home else cfg_path.parent.parent
    return config_from_dict(raw, base=base, config_path=str(cfg_path), env=env_map)
