"""conf/binlake.toml loads into dataclasses; env overrides and validation behave."""

from __future__ import annotations

from pathlib import Path

import pytest

from binlake.config import (
    DEFAULT_CONFIG_PATH,
    REPO_ROOT,
    ConfigError,
    config_from_dict,
    is_s3_uri,
    load_config,
    split_s3_uri,
    to_spark_uri,
)


def test_default_config_file_loads() -> None:
    cfg = load_config(DEFAULT_CONFIG_PATH, env={})
    assert cfg.sources and cfg.sources[0].name == "mariadb-10.11"
    assert Path(cfg.sources[0].uri).is_dir()  # the bundled sample chain
    assert cfg.warehouse == str(REPO_ROOT / ".state" / "warehouse")
    assert cfg.state_dir == str(REPO_ROOT / ".state")
    assert cfg.jars_dir == str(REPO_ROOT / ".jars")
    assert cfg.spark.mode == "local" and cfg.spark.master == "local[2]"
    assert cfg.s3.endpoint_url is None and cfg.s3.path_style_access is False
    assert cfg.nightly_cron


def test_default_config_has_no_secrets() -> None:
    text = DEFAULT_CONFIG_PATH.read_text().lower()
    for line in text.splitlines():
        if line.strip().startswith("#"):
            continue
        assert "secret" not in line and "access_key" not in line and "password" not in line


def test_binlake_config_env_selects_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "c.toml"
    path.write_text('[pipeline]\nwarehouse = "s3a://lake/wh"\n[[sources]]\nname = "a"\nuri = "s3://arch/a"\n')
    monkeypatch.setenv("BINLAKE_CONFIG", str(path))
    cfg = load_config(env={})
    assert cfg.config_path == str(path)
    assert cfg.warehouse == "s3a://lake/wh"
    assert cfg.sources[0].uri == "s3://arch/a/"  # prefixes end with '/'


def test_env_overrides(tmp_path: Path) -> None:
    env = {"BINLAKE_WAREHOUSE": "s3://w/x/", "BINLAKE_S3_ENDPOINT": "http://127.0.0.1:9000",
           "BINLAKE_SPARK_MASTER": "spark://m:7077", "BINLAKE_JARS_DIR": str(tmp_path)}
    cfg = config_from_dict({}, base=tmp_path, env=env)
    assert cfg.warehouse == "s3://w/x"
    assert cfg.s3.endpoint_url == "http://127.0.0.1:9000"
    assert cfg.s3.path_style_access is True  # default with a custom endpoint
    assert cfg.s3.ssl_enabled is False  # http endpoint
    assert cfg.spark.master == "spark://m:7077"
    assert cfg.jars_dir == str(tmp_path.resolve())


def test_relative_paths_anchor_at_base(tmp_path: Path) -> None:
    raw = {"pipeline": {"warehouse": "wh", "state_dir": "st"}, "sources": [{"name": "x", "uri": "arch/x"}]}
    cfg = config_from_dict(raw, base=tmp_path, env={})
    assert cfg.warehouse == str(tmp_path / "wh")
    assert cfg.sources[0].uri == str(tmp_path / "arch" / "x")
    assert cfg.source("x").name == "x"
    with pytest.raises(KeyError):
        cfg.source("nope")


@pytest.mark.parametrize("raw, message", [
    ({"sources": [{"name": "a", "uri": "/x"}, {"name": "a", "uri": "/y"}]}, "duplicate"),
    ({"sources": [{"name": "a"}]}, "required"),
    ({"sources": [{"name": "a b", "uri": "/x"}]}, "may only use"),
    ({"spark": {"mode": "yarn"}}, "spark.mode"),
    ({"spark": {"shuffle_partitions": "4"}}, "expected int"),
    ({"spark": {"conf": ["x"]}}, "spark.conf"),
])
def test_validation_errors(raw: dict, message: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=message):
        config_from_dict(raw, base=tmp_path, env={})


def test_missing_file_is_clear(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "none.toml", env={})


def test_extra_spark_conf_passes_through(tmp_path: Path) -> None:
    cfg = config_from_dict({"spark": {"conf": {"spark.executor.memory": "3g", "spark.x": 1}}}, base=tmp_path, env={})
    assert dict(cfg.spark.extra_conf) == {"spark.executor.memory": "3g", "spark.x": "1"}


def test_uri_helpers() -> None:
    assert is_s3_uri("s3://b/k") and is_s3_uri("s3a://b/k") and not is_s3_uri("/tmp/x")
    assert split_s3_uri("s3a://bucket/a/b") == ("bucket", "a/b")
    assert split_s3_uri("s3://bucket") == ("bucket", "")
    assert to_spark_uri("s3://b/k") == "s3a://b/k"
    assert to_spark_uri("/tmp/x") == "/tmp/x"
    with pytest.raises(ConfigError):
        split_s3_uri("/not/s3")


def test_sources_and_mode_from_env(tmp_path: Path) -> None:
    env = {"BINLAKE_SOURCES": "a=s3://arch/a, b=/data/b", "BINLAKE_SPARK_MODE": "submit"}
    cfg = config_from_dict({"sources": [{"name": "ignored", "uri": "/x"}]}, base=tmp_path, env=env)
    assert [(s.name, s.uri) for s in cfg.sources] == [("a", "s3://arch/a/"), ("b", "/data/b")]
    assert cfg.spark.mode == "submit"
    with pytest.raises(ConfigError, match="name=uri"):
        config_from_dict({}, base=tmp_path, env={"BINLAKE_SOURCES": "oops"})
