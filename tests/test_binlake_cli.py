"""The `binlake` console script (typer): commands, pass-through options, one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from binlake.config import config_from_dict
from binlake_cli.app import main

BINLAKE = Path(sys.executable).parent / "binlake"


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    assert BINLAKE.is_file(), "console script `binlake` missing: run make setup"
    return subprocess.run([str(BINLAKE), *args], capture_output=True, text=True, timeout=120, check=False, cwd=cwd)


def test_help_lists_every_command() -> None:
    proc = run("--help")
    assert proc.returncode == 0
    for command in ("sql", "coverage", "run", "config", "demo", "generate", "archive"):
        assert f" {command} " in proc.stdout
    proc = run("sql", "--help")
    assert proc.returncode == 0 and "--format" in proc.stdout and "--engine" in proc.stdout


@pytest.mark.parametrize("toml, message", [
    ('[pipeline]\nwarehous = "/x"\n', "unknown key 'warehous' in [pipeline]: did you mean 'warehouse'?"),
    ('[spark]\nmod = "submit"\n', "unknown key 'mod' in [spark]: did you mean 'mode'?"),
    ('[spark]\nshuffle_partitions = "4"\n', "spark.shuffle_partitions: expected an integer, got '4'"),
])
def test_config_errors_are_one_line(tmp_path: Path, toml: str, message: str) -> None:
    path = tmp_path / "c.toml"
    path.write_text(toml)
    for args in (("config", str(path)), ("sql", "--config", str(path), "SELECT 1")):
        proc = run(*args)
        assert proc.returncode == 1
        assert proc.stderr == f"binlake: error: {path}: {message}\n"
        assert proc.stdout == ""


def test_config_prints_the_resolved_file(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text('[pipeline]\nwarehouse = "lake"\n[[sources]]\nname = "a"\nuri = "arch/a"\n')
    proc = run("config", "--config", str(path))
    assert proc.returncode == 0, proc.stderr
    shown = json.loads(proc.stdout)
    assert shown["warehouse"] == str(tmp_path / "lake")
    assert shown["sources"] == [{"name": "a", "uri": str(tmp_path / "arch" / "a")}]


def test_config_example_is_a_valid_config(tmp_path: Path) -> None:
    proc = run("config", "--example")
    assert proc.returncode == 0
    cfg = config_from_dict(tomllib.loads(proc.stdout), base=tmp_path, env={})
    assert cfg.sources[0].name == "orders-primary"


def test_pass_through_commands_reach_their_own_parser() -> None:
    proc = run("generate", "--help")
    assert proc.returncode == 0 and "usage: binlake generate" in proc.stdout


def test_usage_errors_exit_2() -> None:
    proc = run("nope")
    assert proc.returncode == 2 and "No such command 'nope'" in proc.stderr and "Traceback" not in proc.stderr
    proc = run("sql", "--format", "xml", "SELECT 1")
    assert proc.returncode == 2 and "xml" in proc.stderr


def test_main_returns_codes_in_process(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "c.toml"
    path.write_text('[pipeline]\nwarehouse = "wh"\nstate_dir = "st"\n')
    assert main(["sql", "--config", str(path), "--format", "csv", "SELECT 1 AS a, 'x\ty' AS b"]) == 0
    assert capsys.readouterr().out == "a,b\n1,x\ty\n"
    assert main(["coverage", "nosuch", "--config", str(path), "--out", str(tmp_path)]) == 1
    assert "unknown source 'nosuch'" in capsys.readouterr().err


def test_demo_without_dag_files_is_a_one_line_error(tmp_path: Path) -> None:
    """An installed wheel has no dags/: the demo says what it needs instead of failing in Airflow."""
    proc = run("demo", "--dags-folder", str(tmp_path / "no-dags"), "--state-dir", str(tmp_path / "state"))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.strip() == (f"binlake: error: binlake demo runs the DAG file binlake_nightly.py, not found in "
                                   f"{tmp_path / 'no-dags'}: run it from a clone of the repository, or pass --dags-folder PATH")
    assert not (tmp_path / "state").exists()  # nothing started, nothing written


@pytest.mark.parametrize("args, message", [
    (("backfill", "--param", "nope=1"), "unknown backfill parameter(s) ['nope']; known: ['source', 'mode', "
                                        "'from_file', 'to_file', 'from_date', 'to_date', 'dry_run']"),
    (("backfill", "--param", "dry_run"), "--param wants KEY=VALUE, got 'dry_run'"),
    (("backfill", "--param", "source=nosuch", "--param", "dry_run=true"),
     "unknown source(s) ['nosuch']; configured: ['mariadb-10.11']"),
    (("nightly", "--param", "mode=missing"), "a nightly run takes no parameters (got ['mode']): use backfill"),
])
def test_run_parameters_are_checked_before_airflow_starts(tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    """``binlake run``: bad parameters are one line and exit 1, and no Airflow state is created."""
    path = tmp_path / "c.toml"
    path.write_text(f'[pipeline]\nwarehouse = "wh"\nstate_dir = "state"\n\n[[sources]]\nname = "mariadb-10.11"\n'
                    f'uri = "{tmp_path / "archive"}"\n')
    proc = run("run", *args, "--config", str(path))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.strip() == f"binlake: error: {message}"
    assert not (tmp_path / "state").exists()
