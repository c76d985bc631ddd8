"""The coverage picture over a warehouse written by the real Spark ingest + reconcile, opened in Chromium.

Sources (tests/_scenario_warehouse.py): ``missing`` lacks binlog.000002 (a GAP of 0:4-6), ``dup`` holds
binlog.000002 twice, ``mysql56``'s second file follows GTIDs of four servers no archived file holds,
``clean`` has nothing wrong. The HTML is loaded by headless Chromium and the DOM after plotly's JS ran
is checked: lane names, the red bands, the labels naming GTIDs and files.
"""

from __future__ import annotations

import re
import shutil
import struct
from pathlib import Path
from typing import Any

import pytest
from _scenario_warehouse import scenario_warehouse, write_config_file

from binlake.config import BinlakeConfig
from binlake.errors import BinlakeError
from binlake.reconcile.report import (
    PROBLEM_COLOUR,
    lanes_of_gtid_set,
    load_coverage,
    run_chromium,
    write_coverage_report,
)

MYSQL56_SERVERS = ("7e23401a-c603-11e3-8e13-5e10e6a05cfb", "8186fc1e-c5ff-11e3-8df9-e66ccf50db66",
                   "a6ce328c-c602-11e3-8e0d-e66ccf50db66", "b7009920-c601-11e3-8e07-5e10e6a05cfb")
needs_chromium = pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium missing: make setup")


@pytest.fixture(scope="module")
def scenario(spark: Any, tmp_path_factory: pytest.TempPathFactory, s3_server: Any) -> BinlakeConfig:
    return scenario_warehouse(spark, tmp_path_factory, s3_server.endpoint_url)


def rendered_dom(html_path: Path) -> str:
    """The page's DOM after its scripts ran (plotly draws the SVG in JS)."""
    return run_chromium("--virtual-time-budget=10000", "--dump-dom", html_path.as_uri()).stdout


def texts(dom: str, css_class: str) -> list[str]:
    """Text of the SVG <text> elements inside groups of ``css_class`` (plotly's tick/annotation groups)."""
    found = re.findall(rf'class="{css_class}"[^>]*>.*?<text[^>]*>(.*?)</text>', dom, flags=re.DOTALL)
    return [re.sub(r"<[^>]+>", "", t).replace("&amp;", "&") for t in found]


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


@pytest.mark.spark
def test_gap_is_loaded_as_typed_rows(scenario: BinlakeConfig) -> None:
    data = load_coverage(scenario, "missing")
    assert [f.file for f in data.files] == ["binlog.000001", "binlog.000003", "binlog.000004"]
    assert all(f.first_event_time and f.last_event_time for f in data.files)
    assert [(i.lane, i.gtid_set) for i in data.intervals] == [("domain 0", "0:1-3"), ("domain 0", "0:7-10")]
    gap, = data.findings
    assert (gap.status, gap.gtids, gap.missing_files, gap.file) == ("GAP", "0:4-6", ("binlog.000002",), "binlog.000003")
    assert gap.label == "GAP · 0:4-6 · missing binlog.000002 · before binlog.000003"


@pytest.mark.spark
@needs_chromium
def test_gap_page_in_headless_chromium(scenario: BinlakeConfig, tmp_path: Path) -> None:
    report = write_coverage_report(scenario, "missing", tmp_path)
    assert report.html_path == tmp_path / "coverage-missing.html"
    page = report.html_path.read_text()
    assert "<script" in page and "<script src=" not in page  # plotly.js inline: opens offline
    dom = rendered_dom(report.html_path)
    assert texts(dom, "ytick") == ["domain 0", "archived files"]
    assert texts(dom, "annotation-text-g") == ["GAP · 0:4-6 · missing binlog.000002 · before binlog.000003"]
    assert "source missing · 3 files · 1 problem(s) in red" in dom
    assert "files in chain order" in dom  # the fixture's events are seconds apart: not drawable to scale
    red = re.findall(r'<path[^>]*style="[^"]*fill: rgb\(214, 39, 40\)', dom)
    green = re.findall(r'<path[^>]*style="[^"]*fill: rgb\(46, 125, 50\)', dom)
    assert PROBLEM_COLOUR == "#d62728" and len(red) == 1 and len(green) == 2
    assert re.findall(r'class="bartext bartext-inside"[^>]*>([^<]+)</text>', dom) == [
        "binlog.000001", "binlog.000003", "binlog.000004"]
    assert "<td>GAP</td><td>binlog.000003</td><td>0:4-6</td><td>binlog.000002</td>" in dom
    assert report.png_path is not None and png_size(report.png_path)[0] == 1400


@pytest.mark.spark
@needs_chromium
def test_servers_held_by_no_file_get_red_lanes(scenario: BinlakeConfig, tmp_path: Path) -> None:
    report = write_coverage_report(scenario, "mysql56", tmp_path, png=False)
    dom = rendered_dom(report.html_path)
    lanes = texts(dom, "ytick")
    assert set(MYSQL56_SERVERS) <= set(lanes)
    label, = texts(dom, "annotation-text-g")
    assert label.startswith("GAP · 7e23401a-c603-11e3-8e13-5e10e6a05cfb:1-5,") and "before mysql-bin.000002" in label


@pytest.mark.spark
@needs_chromium
def test_duplicate_and_clean_sources(scenario: BinlakeConfig, tmp_path: Path) -> None:
    dom = rendered_dom(write_coverage_report(scenario, "dup", tmp_path, png=False).html_path)
    assert texts(dom, "annotation-text-g") == ["DUPLICATE · 0:4-6 · binlog-reupload.000002 = binlog.000002"]
    dom = rendered_dom(write_coverage_report(scenario, "clean", tmp_path, png=False).html_path)
    assert texts(dom, "annotation-text-g") == [] and "no gaps, duplicates or chain breaks" in dom
    assert not re.findall(r'fill: rgb\(214, 39, 40\)', dom)


@pytest.mark.spark
def test_cli_and_errors(scenario: BinlakeConfig, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from binlake_cli.app import main

    config = write_config_file(scenario, tmp_path / "binlake.toml")
    assert main(["coverage", "missing", "--config", str(config), "--out", str(tmp_path / "r"), "--no-png"]) == 0
    assert capsys.readouterr().out == f"{tmp_path / 'r' / 'coverage-missing.html'}\n"
    with pytest.raises(BinlakeError, match="unknown source 'nope' \\(sources: clean, missing, dup, mysql56"):
        load_coverage(scenario, "nope")


def test_lanes_of_gtid_sets() -> None:
    assert lanes_of_gtid_set("0:4-6,1:2") == ["domain 0", "domain 1"]
    assert lanes_of_gtid_set("55778904-0299-11f1-b1b8-4ef0c4956feb:1-13:mytag:1-2") == [
        "55778904-0299-11f1-b1b8-4ef0c4956feb", "55778904-0299-11f1-b1b8-4ef0c4956feb:mytag"]
    assert lanes_of_gtid_set("") == []


@needs_chromium
def test_time_axis_when_times_spread(tmp_path: Path) -> None:
    """Hours between files: x is event time, the GAP band lies between the two files around it."""
    import datetime as dt

    from binlake.reconcile.report import (
        CoverageData,
        CoverageInterval,
        FileSpan,
        Finding,
        build_axis,
        write_html,
    )

    t0 = dt.datetime(2026, 3, 1, 0, 0, 0)
    hour = dt.timedelta(hours=1)
    files = (FileSpan("b.000001", t0, t0 + hour), FileSpan("b.000003", t0 + 2 * hour, t0 + 3 * hour))
    data = CoverageData(
        source="s", files=files,
        intervals=(CoverageInterval("domain 1", "1:1-50", "b.000001", "b.000001", 50),
                   CoverageInterval("domain 1", "1:80-99", "b.000003", "b.000003", 20)),
        findings=(Finding("GAP", "b.000003", "b.000001", "1:51-79", ("b.000002",), None, ""),))
    axis = build_axis(data)
    assert axis.by_time and axis.gaps == {"b.000003": (t0 + hour, t0 + 2 * hour)}
    dom = rendered_dom(write_html(data, tmp_path / "c.html"))
    assert "event time (UTC)" in dom and "files in chain order" not in dom
    assert texts(dom, "annotation-text-g") == ["GAP · 1:51-79 · missing b.000002 · before b.000003"]
    assert texts(dom, "ytick") == ["domain 1", "archived files"]
