"""The wheel (``pip install .``): runs without a git checkout.

Built once per module with pip (hatchling, an isolated build), installed with ``--target`` into a
temporary folder and run from a working directory outside the repository, so nothing can be
found relative to a checkout.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(REPO)],
                   check=True, timeout=600)
    (found,) = out.glob("binlake-*.whl")
    return found


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("site")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(wheel)],
                   check=True, timeout=600)
    return target


def _run(installed: Path, cwd: Path, code: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(installed), **env})


def test_wheel_ships_the_dag_files_samples_and_example_config(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        for dag in ("binlake_nightly.py", "binlake_backfill.py"):
            assert zf.read(f"orchestration/dag_files/{dag}") == (REPO / "dags" / dag).read_bytes()
        samples = sorted(n for n in names if n.startswith("binlake_testing/samples/mariadb-10.11/binlog."))
        assert samples == [f"binlake_testing/samples/mariadb-10.11/binlog.00000{i}" for i in range(1, 5)]
        assert "binlake/config_example.toml" in names
    assert not any(n.startswith(("tests/", "dags/", "bench/")) for n in names)


def test_installed_wheel_finds_its_dag_files_without_a_checkout(installed: Path, tmp_path: Path) -> None:
    proc = _run(installed, tmp_path, "import binlake.config as c, orchestration.run_local as r; "
                                     "print(c.REPO_ROOT); print(r.dags_folder())")
    assert proc.returncode == 0, proc.stderr
    root, dags = proc.stdout.split()
    assert Path(root) == installed
    assert Path(dags) == installed / "orchestration" / "dag_files"
    assert (Path(dags) / "binlake_nightly.py").read_bytes() == (REPO / "dags" / "binlake_nightly.py").read_bytes()


def test_installed_wheel_demo_names_missing_jars_in_one_line(installed: Path, tmp_path: Path) -> None:
    """Without a checkout there is no ``.jars/``: the demo says so before it starts anything."""
    code = "import sys; from binlake_cli import main; sys.exit(main(['demo']))"
    proc = _run(installed, tmp_path, code, BINLAKE_JARS_DIR=str(tmp_path / "no-jars"))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.strip() == (
        f"binlake: error: jars dir {tmp_path / 'no-jars'} lacks delta-spark, delta-storage, hadoop-aws, bundle, "
        "binlake-logstore: run `make setup` in a checkout (fetches them with Maven from conf/pom.xml and builds "
        "binlake-logstore from jvm/logstore), or point [pipeline] "
        "jars_dir (BINLAKE_JARS_DIR for the demo) at a folder holding them")
    assert not (tmp_path / ".binlake-demo").exists()  # nothing started, nothing written


def test_installed_wheel_config_example_loads(installed: Path, tmp_path: Path) -> None:
    code = ("from binlake_cli import main; import sys; sys.exit(main(['config', '--example']))")
    proc = _run(installed, tmp_path, code)
    assert proc.returncode == 0, proc.stderr
    (tmp_path / "binlake.toml").write_text(proc.stdout)
    proc = _run(installed, tmp_path, "from binlake.config import load_config; "
                                     "print(load_config('binlake.toml').warehouse)")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().startswith(str(tmp_path))


def test_demo_without_the_testing_extra_says_which_extra(installed: Path, tmp_path: Path) -> None:
    """moto belongs to the ``[testing]`` extra; without it the demo names the extra, no traceback."""
    code = ("import sys; sys.modules['moto'] = None; from binlake_cli import main; "
            f"sys.exit(main(['demo', '--jars-dir', {str(REPO / '.jars')!r}]))")
    proc = _run(installed, tmp_path, code)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.strip() == ("binlake: error: the loopback S3 server needs moto, part of the testing "
                                   "extra: pip install 'binlake[testing]'")
