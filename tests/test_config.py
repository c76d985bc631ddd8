"""conf/binlake.toml validates against the schema; env overrides, path anchoring and errors behave."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from binlake.config import (
    DEFAULT_CONFIG_PATH,
    EXAMPLE_CONFIG_PATH,
    REPO_ROOT,
    ConfigError,
    config_from_dict,
    is_s3_uri,
    load_config,
    split_s3_uri,
    to_spark_uri,
)
from binlake.errors import BinlakeError


def test_default_config_file_loads() -> None:
    cfg = load_config(DEFAULT_CONFIG_PATH, env={})
    assert cfg.sources and cfg.sources[0].name == "mariadb-10.11"
    assert Path(cfg.sources[0].uri).is_dir()  # the bundled sample chain
    assert cfg.warehouse == str(REPO_ROOT / ".state" / "warehouse")
    assert cfg.state_dir == str(REPO_ROOT / ".state")
    assert cfg.jars_dir == str((REPO_ROOT / ".jars").resolve())  # a worktree may symlink it
    assert cfg.spark.mode == "local" and cfg.spark.master == "local[2]"
    assert cfg.s3.endpoint_url is None and cfg.s3.path_style_access is False
    assert cfg.nightly_cron == "0 2 * * *"
    assert cfg.archive is None


def test_default_config_has_no_secrets() -> None:
    for path in (DEFAULT_CONFIG_PATH, EXAMPLE_CONFIG_PATH):
        for line in path.read_text().lower().splitlines():
            if line.strip().startswith("#"):
                continue
            assert "secret" not in line and "access_key" not in line and "password" not in line


def test_packaged_example_is_valid(tmp_path: Path) -> None:
    copy = tmp_path / "binlake.toml"
    copy.write_text(EXAMPLE_CONFIG_PATH.read_text())
    cfg = load_config(copy, env={})
    assert cfg.warehouse == str(tmp_path / "warehouse")
    assert [(s.name, s.uri) for s in cfg.sources] == [("orders-primary", "s3://my-binlog-archive/orders-primary/")]


def test_binlake_config_env_selects_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "c.toml"
    path.write_text('[pipeline]\nwarehouse = "s3a://lake/wh"\n[[sources]]\nname = "a"\nuri = "s3://arch/a"\n')
    monkeypatch.setenv("BINLAKE_CONFIG", str(path))
    cfg = load_config(env={})
    assert cfg.config_path == str(path)
    assert cfg.warehouse == "s3a://lake/wh"
    assert cfg.sources[0].uri == "s3://arch/a/"  # prefixes end with '/'


def test_relative_paths_resolve_from_the_files_folder(tmp_path: Path) -> None:
    folder = tmp_path / "deploy" / "conf"
    folder.mkdir(parents=True)
    path = folder / "binlake.toml"
    path.write_text('[pipeline]\nwarehouse = "wh"\nstate_dir = "../state"\n'
                    '[[sources]]\nname = "x"\nuri = "archive/x"\n')
    cfg = load_config(path, env={})
    assert cfg.warehouse == str(folder / "wh")
    assert cfg.state_dir == str(tmp_path / "deploy" / "state")
    assert cfg.sources[0].uri == str(folder / "archive" / "x")
    # defaults are relative to the file's folder too
    assert cfg.jars_dir == str(folder / ".jars")


def test_no_checkout_no_env_is_an_explicit_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import binlake.config as config_module

    monkeypatch.delenv("BINLAKE_CONFIG", raising=False)
    monkeypatch.setattr(config_module, "DEFAULT_CONFIG_PATH", tmp_path / "absent.toml")
    with pytest.raises(ConfigError, match=r"set BINLAKE_CONFIG=/path/to/binlake.toml.*--config"):
        load_config(env={})


def test_env_overrides(tmp_path: Path) -> None:
    env = {"BINLAKE_WAREHOUSE": "s3://w/x/", "BINLAKE_S3_ENDPOINT": "http://127.0.0.1:9000",
           "BINLAKE_SPARK_MASTER": "spark://m:7077", "BINLAKE_JARS_DIR": str(tmp_path),
           "BINLAKE_SPARK_JARS_ON_WORKERS": "true"}
    cfg = config_from_dict({}, base=tmp_path, env=env)
    assert cfg.warehouse == "s3://w/x"
    assert cfg.s3.endpoint_url == "http://127.0.0.1:9000"
    assert cfg.s3.path_style_access is True  # default with a custom endpoint
    assert cfg.s3.ssl_enabled is False  # http endpoint
    assert cfg.spark.master == "spark://m:7077"
    assert cfg.spark.jars_on_workers is True
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
    ({"sources": [{"name": "a", "uri": "/x"}, {"name": "a", "uri": "/y"}]}, "sources: duplicate source name 'a'"),
    ({"sources": [{"name": "a"}]}, r"sources\[0\].uri: required key is missing"),
    ({"sources": [{"name": "a b", "uri": "/x"}]}, r"sources\[0\].name: source name 'a b' may only use"),
    ({"spark": {"mode": "yarn"}}, "spark.mode: expected 'local', 'submit' or 'connect', got 'yarn'"),
    ({"spark": {"shuffle_partitions": "4"}}, "spark.shuffle_partitions: expected an integer, got '4'"),
    ({"spark": {"ui_enabled": "no"}}, "spark.ui_enabled: expected true or false, got 'no'"),
    ({"spark": {"conf": ["x"]}}, r"spark.conf: expected a table, got \['x'\]"),
    ({"pipeline": {"warehous": "/x"}}, r"unknown key 'warehous' in \[pipeline\]: did you mean 'warehouse'\?"),
    ({"spark": {"mod": "submit"}}, r"unknown key 'mod' in \[spark\]: did you mean 'mode'\?"),
    ({"sources": [{"name": "a", "url": "/x"}]}, r"unknown key 'url' in \[sources\[0\]\]: did you mean 'uri'\?"),
    ({"pipline": {}}, r"unknown section or key 'pipline' at the top level: did you mean 'pipeline'\?"),
    ({"warehouse": "/x"}, r"'warehouse' belongs in \[pipeline\]"),
])
def test_validation_errors(raw: dict, message: str, tmp_path: Path) -> None:  # type: ignore[type-arg]
    with pytest.raises(ConfigError, match=message) as info:
        config_from_dict(raw, base=tmp_path, env={})
    assert isinstance(info.value, BinlakeError)
    assert "\n" not in str(info.value) and "pydantic" not in str(info.value)


def test_error_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text('[pipeline]\nwarehous = "/x"\n')
    with pytest.raises(ConfigError) as info:
        load_config(path, env={})
    assert str(info.value) == (f"{path}: unknown key 'warehous' in [pipeline]: did you mean 'warehouse'?")
    path.write_text('[pipeline\n')
    with pytest.raises(ConfigError, match=f"{path}: not valid TOML: .*line 1"):
        load_config(path, env={})


def test_bad_env_value_is_checked_too(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="spark.mode: expected 'local', 'submit' or 'connect', got 'yarn'"):
        config_from_dict({}, base=tmp_path, env={"BINLAKE_SPARK_MODE": "yarn"})


def test_missing_file_is_clear(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "none.toml", env={})


def test_extra_spark_conf_passes_through(tmp_path: Path) -> None:
    cfg = config_from_dict({"spark": {"conf": {"spark.executor.memory": "3g", "spark.x": 1, "spark.y": True}}},
                           base=tmp_path, env={})
    assert dict(cfg.spark.extra_conf) == {"spark.executor.memory": "3g", "spark.x": "1", "spark.y": "true"}


def test_archive_table_is_typed(tmp_path: Path) -> None:
    """[archive] is the archiver's schema (issue 15): keys for every source, [archive.<source>] per source."""
    raw = {"sources": [{"name": "a", "uri": "/x"}, {"name": "b", "uri": "/y"}],
           "archive": {"host": "db.internal", "server_id": 901, "heartbeat_s": 2, "a": {"server_id": 902}}}
    cfg = config_from_dict(raw, base=tmp_path, env={})
    assert cfg.archive is not None
    a, b = cfg.archive.for_source("a"), cfg.archive.for_source("b")
    assert (a.host, a.server_id, a.heartbeat_s, a.port) == ("db.internal", 902, 2.0, 3306)
    assert (b.host, b.server_id) == ("db.internal", 901)
    assert a.spool_dir == str(tmp_path / ".state" / "archive-spool")  # default: under state_dir
    for bad, message in [
        ({"archive": {"anything": {"nested": 1}}}, r"unknown key 'nested' in \[archive.anything\]"),
        ({"archive": {"prot": 3307}}, r"unknown key 'prot' in \[archive\]: did you mean 'port'\?"),
        ({"archive": {"port": "3307"}}, r"archive.port: expected an integer, got '3307'"),
        ({**raw, "archive": {"b": {"ssl_mode": "on"}}}, r"archive.b.ssl_mode: expected 'preferred'"),
        ({**raw, "archive": {"c": {"port": 1}}}, r"\[archive.c\] names no \[\[sources\]\] entry"),
        ({"archive": {"password": "x"}}, r"unknown key 'password' in \[archive\]"),
    ]:
        with pytest.raises(ConfigError, match=message):
            config_from_dict(bad, base=tmp_path, env={})


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


def test_installed_package_without_checkout_uses_env_file(tmp_path: Path) -> None:
    """A copy of the package outside any checkout: no conf/ next to it, BINLAKE_CONFIG decides."""
    import shutil

    shutil.copytree(REPO_ROOT / "binlake", tmp_path / "site" / "binlake",
                    ignore=shutil.ignore_patterns("__pycache__"))
    code = "from binlake.config import load_config; print(load_config().warehouse)"
    env = {"PYTHONPATH": str(tmp_path / "site"), "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60,
                          check=False, cwd=tmp_path)
    assert proc.returncode != 0 and "set BINLAKE_CONFIG=" in proc.stderr
    cfg = tmp_path / "my.toml"
    cfg.write_text(EXAMPLE_CONFIG_PATH.read_text())
    proc = subprocess.run([sys.executable, "-c", code], env={**env, "BINLAKE_CONFIG": str(cfg)},
                          capture_output=True, text=True, timeout=60, check=False, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(tmp_path / "warehouse")


def test_on_replaced_object_policy(tmp_path: Path) -> None:
    from binlake.config import config_from_dict

    assert config_from_dict({}, base=tmp_path, env={}).on_replaced_object == "reingest"
    cfg = config_from_dict({"pipeline": {"on_replaced_object": "fail"}}, base=tmp_path, env={})
    assert cfg.on_replaced_object == "fail"
    with pytest.raises(BinlakeError, match="pipeline.on_replaced_object: expected .reingest. or .fail., got .ignore."):
        config_from_dict({"pipeline": {"on_replaced_object": "ignore"}}, base=tmp_path, env={})


def test_gold_union_table(tmp_path: Path) -> None:
    """[gold] union: union table name -> ``db.table`` (every source) or ``{ table, sources }`` (a fleet)."""
    raw = {"sources": [{"name": "eu-1", "uri": "/x"}, {"name": "eu-2", "uri": "/y"}, {"name": "us-1", "uri": "/z"}],
           "gold": {"union": {"all_orders": "shop.orders",
                              "eu_orders": {"table": "Shop.Orders", "sources": ["eu-1", "eu-2"]}}}}
    gold = config_from_dict(raw, base=tmp_path, env={}).gold
    assert gold.unions_of("eu-1", "shop", "orders") == ("all_orders", "eu_orders")  # db.table case-insensitive
    assert gold.unions_of("us-1", "SHOP", "ORDERS") == ("all_orders",)
    assert gold.unions_of("eu-2", "shop", "customer") == ()
    assert config_from_dict({}, base=tmp_path, env={}).gold.union == {}
    for bad, message in [
        ({"union": {"all__orders": "shop.orders"}}, r"gold.union: union table name 'all__orders': .* '__'"),
        ({"union": {"Orders": "shop.orders"}}, r"gold.union: union table name 'Orders'"),
        ({"union": {"all_orders": "orders"}}, r"gold.union.all_orders.table: expected db.table, got 'orders'"),
        ({"union": {"all_orders": {"tabel": "shop.orders"}}},
         r"unknown key 'tabel' in \[gold.union.all_orders\]: did you mean 'table'\?"),
        ({"union": {"all_orders": {"table": "shop.orders", "sources": ["eu-3"]}}},
         r"\[gold.union\] all_orders: sources \['eu-3'\] name no \[\[sources\]\] entry"),
        ({"union": {"all_orders": 1}}, "gold.union.all_orders: expected a table, got 1"),
        ({"unoin": {}}, r"unknown key 'unoin' in \[gold\]: did you mean 'union'\?"),
    ]:
        with pytest.raises(ConfigError, match=message):
            config_from_dict({**raw, "gold": bad}, base=tmp_path, env={})


@pytest.mark.parametrize("name", [".", "..", "../victim", "/abs", "-a", "a-", "a_", "_a", "a__b", "a-_b", "a..b",
                                  "a/b", ""])
def test_source_names_must_be_safe_identifiers(name: str, tmp_path: Path) -> None:
    """`.`/`..` were accepted; a name ending in '_' or holding '__' makes gold names ambiguous
    (``x_`` + db ``a`` and ``x`` + db ``_a`` are both ``x___a__...``)."""
    with pytest.raises(ConfigError, match=r"sources\[0\].name: source name .* (may only|must)"):
        config_from_dict({"sources": [{"name": name, "uri": "/x"}]}, base=tmp_path, env={})


@pytest.mark.parametrize("first, second, prefix", [
    ("a-b", "a_b", "a_b"), ("a.b", "a-b", "a_b"), ("Shop", "shop", "shop"),
])
def test_sources_sharing_a_gold_prefix_are_rejected(first: str, second: str, prefix: str, tmp_path: Path) -> None:
    """`a-b` and `a_b` both wrote gold.a_b__<db>__<table>: each source's gold step deleted the other's rows."""
    raw = {"sources": [{"name": first, "uri": "/x"}, {"name": "other", "uri": "/z"}, {"name": second, "uri": "/y"}]}
    with pytest.raises(ConfigError) as info:
        config_from_dict(raw, base=tmp_path, env={})
    assert str(info.value) == (f"config: sources: sources {first!r} and {second!r} share the gold table prefix "
                               f"'gold.{prefix}__' (gold names are lower-case, '-' and '.' become '_'): "
                               "rename one")


def test_sources_sharing_a_gold_prefix_from_env_are_rejected(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="sources 'a-b' and 'a_b' share the gold table prefix"):
        config_from_dict({}, base=tmp_path, env={"BINLAKE_SOURCES": "a-b=/x,a_b=/y"})


def test_usual_source_names_still_load(tmp_path: Path) -> None:
    names = ["mariadb-10.11", "mysql-8.4-synthetic", "maria-gold", "my8-lineitem", "orders_primary", "S1"]
    cfg = config_from_dict({"sources": [{"name": n, "uri": f"/{i}"} for i, n in enumerate(names)]},
                           base=tmp_path, env={})
    assert [s.name for s in cfg.sources] == names
