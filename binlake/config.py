"""binlake configuration: one TOML file validated by a pydantic schema, loaded into frozen dataclasses.

Why one file: the same settings drive the in-process demo, the tests, the Airflow DAG and
spark-submit on a cluster; keeping them in one documented place (and never secrets) means a
deployment differs from the demo by that file alone. Credentials come from the standard AWS
chain (env vars, ~/.aws, instance/container roles) or an Airflow connection, never from here.

Why a schema (pydantic, unknown keys forbidden, strict types): a misspelled key (``warehous``,
``mod``) used to be ignored silently and a default took its place; now it is an error naming the
key, its section and the closest valid key, and a wrong type is one line, not a traceback.

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

import difflib
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from binlake.errors import BinlakeError

REPO_ROOT: Path = Path(__file__).resolve().parent.parent
DEFAULT_CONFIG_PATH: Path = REPO_ROOT / "conf" / "binlake.toml"
EXAMPLE_CONFIG_PATH: Path = Path(__file__).resolve().parent / "config_example.toml"

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
# The resolved configuration other modules use (frozen dataclasses: dataclasses.replace works).
# ---------------------------------------------------------------------------------------------

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
    credentials_provider: str = _DEFAULT_CREDENTIALS_PROVIDER
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
    """The whole configuration. Local paths are absolute after loading.

    ``archive`` is the optional ``[archive]`` table, typed loosely (a mapping) until the archiver's
    own settings model (issue 15, ``ArchiverSettings``) validates it.
    """

    sources: tuple[SourceConfig, ...]
    warehouse: str
    state_dir: str
    jars_dir: str
    nightly_cron: str
    s3: S3Settings
    spark: SparkSettings
    config_path: str | None = None
    archive: Mapping[str, Any] | None = None

    def source(self, name: str) -> SourceConfig:
        """The source called ``name`` (KeyError if unknown)."""
        for src in self.sources:
            if src.name == name:
                return src
        raise KeyError(name)


# ---------------------------------------------------------------------------------------------
# The file's schema (what may appear in the TOML). Defaults that depend on other fields (path
# style and TLS follow the endpoint) are None here and filled in by config_from_dict.
# ---------------------------------------------------------------------------------------------

class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class PipelineSection(_Section):
    """``[pipeline]``: where tables and local state live, when the nightly run starts."""

    warehouse: str = ".state/warehouse"
    state_dir: str = ".state"
    jars_dir: str = ".jars"
    nightly_cron: str = "0 2 * * *"


class SourceSection(_Section):
    """One ``[[sources]]`` block."""

    name: str
    uri: str

    @field_validator("name")
    @classmethod
    def _name_is_an_identifier(cls, name: str) -> str:
        if not name or not all(c.isalnum() or c in "-_." for c in name):
            raise ValueError(f"source name {name!r} may only use letters, digits, '-', '_', '.'")
        return name


class S3Section(_Section):
    """``[s3]``: endpoint and client behaviour, never credentials."""

    endpoint_url: str | None = None
    region: str = "us-east-1"
    path_style_access: bool | None = None
    aws_conn_id: str | None = None
    credentials_provider: str = _DEFAULT_CREDENTIALS_PROVIDER
    max_attempts: int = 5
    ssl_enabled: bool | None = None


class SparkSection(_Section):
    """``[spark]`` and its free-form ``[spark.conf]`` table."""

    mode: Literal["local", "submit"] = "local"
    master: str = "local[2]"
    conn_id: str = "spark_default"
    driver_memory: str = "2g"
    shuffle_partitions: int = 4
    ui_enabled: bool = True
    log_level: str = "WARN"
    jars_on_workers: bool = False
    conf: dict[str, str | int | float | bool] = {}


class ConfigFile(_Section):
    """The whole file. ``archive`` is accepted as any table for now (issue 15 types it)."""

    pipeline: PipelineSection = PipelineSection()
    sources: list[SourceSection] = []
    s3: S3Section = S3Section()
    spark: SparkSection = SparkSection()
    archive: dict[str, Any] | None = None

    @field_validator("sources")
    @classmethod
    def _unique_names(cls, sources: list[SourceSection]) -> list[SourceSection]:
        seen: set[str] = set()
        for src in sources:
            if src.name in seen:
                raise ValueError(f"duplicate source name {src.name!r}")
            seen.add(src.name)
        return sources


_SECTIONS: dict[str, type[BaseModel]] = {
    "pipeline": PipelineSection, "sources": SourceSection, "s3": S3Section, "spark": SparkSection,
}

# env var -> (section, key); BINLAKE_SOURCES is handled apart (it replaces a list).
_ENV_OVERRIDES: dict[str, tuple[str, str]] = {
    "BINLAKE_WAREHOUSE": ("pipeline", "warehouse"),
    "BINLAKE_STATE_DIR": ("pipeline", "state_dir"),
    "BINLAKE_JARS_DIR": ("pipeline", "jars_dir"),
    "BINLAKE_S3_ENDPOINT": ("s3", "endpoint_url"),
    "BINLAKE_SPARK_MASTER": ("spark", "master"),
    "BINLAKE_SPARK_MODE": ("spark", "mode"),
    "BINLAKE_SPARK_JARS_ON_WORKERS": ("spark", "jars_on_workers"),
}

_TYPE_WORDS = {
    "int_type": "an integer", "string_type": "a string", "bool_type": "true or false",
    "float_type": "a number", "dict_type": "a table", "list_type": "a list of [[...]] blocks",
    "model_type": "a table", "int_from_float": "an integer",
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
    if not parent:
        valid = list(ConfigFile.model_fields)
        message = f"unknown section or key {key!r} at the top level"
    else:
        model = _SECTIONS.get(str(parent[0]))
        valid = list(model.model_fields) if model else []
        message = f"unknown key {key!r} in [{_where(loc[:-1])}]"
    close = difflib.get_close_matches(key, valid, n=1, cutoff=0.6)
    if close:
        return f"{message}: did you mean {close[0]!r}?"
    homes = [name for name, model in _SECTIONS.items() if key in model.model_fields]
    if homes:
        return f"{message}: {key!r} belongs in [{homes[0]}]"
    return f"{message} (valid: {', '.join(valid)})"


def _error_line(error: Mapping[str, Any]) -> str:
    """One readable line for one pydantic error (no pydantic URL, no 'Input should be')."""
    loc = tuple(error["loc"])
    kind = str(error["type"])
    if kind == "extra_forbidden":
        return _unknown_key_message(loc)
    where = _where(loc)
    if kind == "missing":
        return f"{where}: required key is missing"
    if kind == "value_error":
        return f"{where}: {error.get('ctx', {}).get('error', error['msg'])}"
    if kind == "literal_error":
        return f"{where}: expected {error['ctx']['expected']}, got {error['input']!r}"
    wanted = _TYPE_WORDS.get(kind)
    if wanted:
        return f"{where}: expected {wanted}, got {error['input']!r}"
    return f"{where}: {error['msg']}"


def validate_config_file(raw: Mapping[str, Any], origin: str = "config") -> ConfigFile:
    """Validate parsed TOML against the schema; ConfigError lists each problem on one line."""
    try:
        return ConfigFile.model_validate(dict(raw))
    except ValidationError as exc:
        errors = exc.errors()
        lines = [_error_line(err) for err in errors if not _explained_by_a_typo(err, errors)]
        raise ConfigError(f"{origin}: " + f"\n{origin}: ".join(lines)) from None


def _explained_by_a_typo(error: Mapping[str, Any], errors: list[Any]) -> bool:
    """A missing key whose misspelling is reported next to it (``url`` for ``uri``) adds nothing."""
    if error["type"] != "missing":
        return False
    loc = tuple(error["loc"])
    for other in errors:
        other_loc = tuple(other["loc"])
        if (other["type"] == "extra_forbidden" and other_loc[:-1] == loc[:-1]
                and difflib.get_close_matches(str(other_loc[-1]), [str(loc[-1])], n=1, cutoff=0.6)):
            return True
    return False


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


def _resolve(file: ConfigFile, base: Path, config_path: str | None) -> BinlakeConfig:
    """The validated file -> the dataclasses other modules use (paths absolute, defaults filled)."""
    sources = []
    for src in file.sources:
        uri = resolve_location(src.uri, base)
        if is_s3_uri(uri) and not uri.endswith("/"):
            uri += "/"
        sources.append(SourceConfig(name=src.name, uri=uri))
    s3, spark, pipeline = file.s3, file.spark, file.pipeline
    endpoint = s3.endpoint_url or None
    return BinlakeConfig(
        sources=tuple(sources),
        warehouse=resolve_location(pipeline.warehouse, base).rstrip("/"),
        state_dir=resolve_location(pipeline.state_dir, base),
        jars_dir=resolve_location(pipeline.jars_dir, base),
        nightly_cron=pipeline.nightly_cron,
        s3=S3Settings(
            endpoint_url=endpoint, region=s3.region,
            path_style_access=s3.path_style_access if s3.path_style_access is not None else endpoint is not None,
            aws_conn_id=s3.aws_conn_id or None, credentials_provider=s3.credentials_provider,
            max_attempts=s3.max_attempts,
            ssl_enabled=(s3.ssl_enabled if s3.ssl_enabled is not None
                         else not (endpoint or "").startswith("http://")),
        ),
        spark=SparkSettings(
            mode=spark.mode, master=spark.master, conn_id=spark.conn_id, driver_memory=spark.driver_memory,
            shuffle_partitions=spark.shuffle_partitions, ui_enabled=spark.ui_enabled,
            log_level=spark.log_level, jars_on_workers=spark.jars_on_workers,
            extra_conf={str(k): str(v).lower() if isinstance(v, bool) else str(v) for k, v in spark.conf.items()},
        ),
        config_path=config_path,
        archive=file.archive,
    )


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
