"""`binlake sql`'s one-shot fast path imports neither pyspark nor pandas (its start-up is its imports).

A fresh interpreter runs the command line's ``main`` on a small warehouse written by delta-rs (a
partitioned ``silver.row_changes``, so delta-rs builds partition expressions, and a filter DuckDB
pushes into the Arrow scan), then reports which heavy modules it holds. The same interpreter then
converts pandas data through pyarrow, which must work as before: the fast path keeps pandas out of
its own scans without leaving pyarrow believing pandas is absent.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake

REPO_ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def config_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("sql-startup")
    rows = 90
    write_deltalake(str(root / "wh" / "silver" / "row_changes"), pa.table({
        "source": [f"s{i % 3}" for i in range(rows)], "seq": list(range(rows)),
        "db": ["shop"] * rows}), partition_by=["source"])
    config = root / "binlake.toml"
    config.write_text(f'[pipeline]\nwarehouse = "{root / "wh"}"\nstate_dir = "{root / "state"}"\n'
                      f'jars_dir = "{REPO_ROOT / ".jars"}"\n')
    return config


PROBE = textwrap.dedent("""
    import contextlib, io, json, sys
    from binlake_cli.app import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["sql", "--config", sys.argv[1], "--format", "csv", sys.argv[2]])
    heavy = sorted({m.split(".")[0] for m in sys.modules} & {"pandas", "pyspark", "py4j", "airflow"})

    import numpy as np
    import pandas as pd
    import pyarrow as pa
    import pyarrow.lib

    after = {
        "numpy_kept": pyarrow.lib.np is np,
        "series_nulls": pa.array(pd.Series([1.5, float("nan"), None])).null_count,
        "nat_nulls": pa.array([pd.NaT, None], type=pa.timestamp("us"), from_pandas=True).null_count,
        "frame": pa.Table.from_pandas(pd.DataFrame({"a": [1, 2]})).to_pandas()["a"].tolist(),
    }
    print(json.dumps({"code": code, "out": out.getvalue(), "heavy": heavy, "after": after}))
    """)


@pytest.mark.parametrize(("query", "want"), [
    ("SELECT count(*) FROM silver.row_changes", "COUNT(*)\n90\n"),
    ("SELECT source, count(*) AS n, max(seq) AS top FROM silver.row_changes WHERE source = 's1' AND seq > 40 "
     "GROUP BY source", "source,n,top\ns1,16,88\n"),
])
def test_one_shot_fast_path_imports_no_pyspark_or_pandas(config_file: Path, query: str, want: str) -> None:
    run = subprocess.run([sys.executable, "-c", PROBE, str(config_file), query], capture_output=True, text=True,
                         timeout=120, check=False, cwd=REPO_ROOT)
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout.splitlines()[-1])
    assert (result["code"], result["out"].replace("\r\n", "\n")) == (0, want), run.stderr[-2000:]
    assert result["heavy"] == []
    assert result["after"] == {"numpy_kept": True, "series_nulls": 2, "nat_nulls": 2, "frame": [1, 2]}
