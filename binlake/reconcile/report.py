"""A picture of what the archive holds for one source: a timeline per GTID source, problems in red.

x = time, one lane per GTID key (MySQL server UUID, UUID + tag, or MariaDB domain). Each merged
interval of ``meta.gtid_coverage`` is a bar spanning the event times of the files holding it
(``meta.binlog_files.first_event_time`` / ``last_event_time``); every finding of
``meta.gtid_reconciliation`` that is not OK (GAP, OVERLAP, DUPLICATE, CHAIN_BREAK) is a red band
in the lanes of the GTIDs it concerns, labelled with its status, GTID set and files. A GAP whose
GTIDs belong to a server no archived file holds gets a lane of its own (all red).

Why plotly: a maintained plotting library draws the axes, hover texts and labels, and writes one
self-contained HTML page (plotly.js inline, opens offline). The PNG is a screenshot of that page
by headless Chromium (:func:`screenshot`), not plotly's kaleido export: Chromium is needed anyway
to test what the page shows, kaleido would add a package plus a browser of its own, and the PNG is
then exactly what the HTML shows.

Input is read without Spark (delta-rs), so ``binlake coverage SOURCE`` takes a second, not a JVM.
"""

from __future__ import annotations

import datetime as dt
import html
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from binlake.config import BinlakeConfig
from binlake.errors import BinlakeError

OK_COLOUR = "#2e7d32"
PROBLEM_COLOUR = "#d62728"
FILE_COLOUR = "#9e9e9e"
FILES_LANE = "archived files"
MIN_BAND = dt.timedelta(seconds=1)


@dataclass(frozen=True)
class FileSpan:
    """One archived file and the time its events span."""

    file: str
    first_event_time: dt.datetime | None
    last_event_time: dt.datetime | None


@dataclass(frozen=True)
class CoverageInterval:
    """One merged GNO interval of ``meta.gtid_coverage``."""

    lane: str
    gtid_set: str
    first_file: str
    last_file: str
    transactions: int


@dataclass(frozen=True)
class Finding:
    """A reconciliation row that is not OK."""

    status: str
    file: str
    previous_file: str | None
    gtids: str  # missing GTIDs (GAP) or extra ones (OVERLAP, DUPLICATE)
    missing_files: tuple[str, ...]
    duplicate_of: str | None
    detail: str

    @property
    def label(self) -> str:
        """What the red band says: status, GTID set, files."""
        parts = [self.status]
        if self.gtids:
            parts.append(self.gtids)
        if self.missing_files:
            parts.append("missing " + ", ".join(self.missing_files))
        if self.duplicate_of:
            parts.append(f"{self.file} = {self.duplicate_of}")
        else:  # a GAP lies before the file that noticed it; other findings are in the file
            parts.append(f"{'before' if self.status == 'GAP' else 'at'} {self.file}")
        return " · ".join(parts)


@dataclass(frozen=True)
class CoverageData:
    """Everything the picture shows for one source."""

    source: str
    files: tuple[FileSpan, ...]
    intervals: tuple[CoverageInterval, ...]
    findings: tuple[Finding, ...]
    chain_order: tuple[str, ...] = ()  # files in reconciliation chain order


@dataclass(frozen=True)
class CoverageReport:
    """Files written by :func:`write_coverage_report`."""

    html_path: Path
    png_path: Path | None

    @property
    def files(self) -> list[Path]:
        return [p for p in (self.html_path, self.png_path) if p is not None]


def lane_name(sid: str, tag: str = "") -> str:
    """``uuid``, ``uuid:tag`` or ``domain 0`` (MariaDB domains are numbers)."""
    base = f"domain {sid}" if sid.isdigit() else sid
    return f"{base}:{tag}" if tag else base


def lanes_of_gtid_set(text: str) -> list[str]:
    """Lane names a canonical GTID-set text mentions: ``u:1-5:tag:1-2,0:4-6`` -> [u, u:tag, domain 0].

    Hand-written (a few lines) because binlog_parser's GtidSet parses MySQL UUID keys only, while
    binlake's canonical text also carries MariaDB domain numbers.
    """
    lanes: list[str] = []
    for member in filter(None, (m.strip() for m in text.split(","))):
        sid, *tokens = member.split(":")
        tag = ""
        for token in tokens:
            if token[:1].isdigit():
                lanes.append(lane_name(sid, tag))  # an interval of the current (sid, tag)
            else:
                tag = token
    return list(dict.fromkeys(lanes))


def read_table_rows(cfg: BinlakeConfig, full_name: str, source: str) -> list[dict[str, Any]]:
    """Rows of one meta table for ``source`` through delta-rs (no JVM); [] when the table is absent."""
    from binlake.lake.delta_tables import open_delta_table
    from binlake.lake.tables import table_location

    delta = open_delta_table(table_location(cfg.warehouse, full_name), cfg.s3)
    if delta is None:
        return []
    rows = delta.to_pyarrow_table(filters=[("source", "=", source)])
    return list(rows.to_pylist())


def _utc(value: dt.datetime | None) -> dt.datetime | None:
    if value is None:
        return None
    return value.astimezone(dt.UTC).replace(tzinfo=None) if value.tzinfo else value


def load_coverage(cfg: BinlakeConfig, source: str) -> CoverageData:
    """The three meta tables for ``source`` as typed rows."""
    files = tuple(FileSpan(r["file"], _utc(r["first_event_time"]), _utc(r["last_event_time"]))
                  for r in read_table_rows(cfg, "meta.binlog_files", source))
    intervals = tuple(
        CoverageInterval(lane=lane_name(r["sid"], r["tag"] or ""), gtid_set=r["gtid_set"],
                         first_file=r["first_file"], last_file=r["last_file"], transactions=r["transactions"])
        for r in sorted(read_table_rows(cfg, "meta.gtid_coverage", source),
                        key=lambda r: (r["sid"], r["tag"], r["gno_start"])))
    chain = sorted(read_table_rows(cfg, "meta.gtid_reconciliation", source), key=lambda r: r["chain_index"])
    findings = tuple(
        Finding(status=r["status"], file=r["file"], previous_file=r["previous_file"],
                gtids=r["missing_gtids"] or r["extra_gtids"] or "", missing_files=tuple(r["missing_files"] or ()),
                duplicate_of=r["duplicate_of"], detail=r["detail"] or "")
        for r in chain if r["status"] != "OK")
    if not files and not any(s.name == source for s in cfg.sources):
        _unknown_source(cfg, source)
    if not files:
        raise BinlakeError(f"nothing ingested for source {source!r} in warehouse {cfg.warehouse} "
                           f"(config: {cfg.config_path or 'built in'})")
    return CoverageData(source=source, files=files, intervals=intervals, findings=findings,
                        chain_order=tuple(r["file"] for r in chain))


def _unknown_source(cfg: BinlakeConfig, source: str) -> None:
    names = ", ".join(s.name for s in cfg.sources) or "none configured"
    raise BinlakeError(f"unknown source {source!r} (sources: {names}; config: {cfg.config_path or 'built in'})")


@dataclass(frozen=True)
class Axis:
    """Where things go along x: event time, or chain order when the event times are too close to draw.

    ``spans`` maps a file name to its (x0, x1); ``gaps`` maps the file a GAP precedes to the slot
    drawn for it. In time mode x values are datetimes, in chain mode slot numbers.
    """

    by_time: bool
    spans: dict[str, tuple[Any, Any]]
    gaps: dict[str, tuple[Any, Any]]
    ticks: tuple[tuple[float, str], ...] = ()


def _drawable_in_time(files: Sequence[FileSpan]) -> bool:
    """Time scale only when every file has times, no two start together and the whole spans a minute."""
    firsts = [f.first_event_time for f in files]
    lasts = [f.last_event_time for f in files]
    if not files or any(x is None for x in firsts + lasts):
        return False
    starts = [x for x in firsts if x is not None]
    ends = [x for x in lasts if x is not None]
    return len(set(starts)) == len(starts) and max(ends) - min(starts) >= dt.timedelta(minutes=1)


def build_axis(data: CoverageData) -> Axis:
    gap_before = {f.file: f for f in data.findings if f.status == "GAP"}
    if _drawable_in_time(data.files):
        spans: dict[str, tuple[Any, Any]] = {}
        for f in data.files:
            first = f.first_event_time or dt.datetime.min  # never None here (_drawable_in_time)
            spans[f.file] = (first, max(f.last_event_time or first, first + MIN_BAND))
        gaps: dict[str, tuple[Any, Any]] = {}
        for name, finding in gap_before.items():
            before, here = spans.get(finding.previous_file or ""), spans.get(name)
            if here is not None:
                start = before[1] if before is not None else here[0] - MIN_BAND
                gaps[name] = (start, max(here[0], start + MIN_BAND))
        return Axis(by_time=True, spans=spans, gaps=gaps)
    order = list(data.chain_order) + sorted({f.file for f in data.files} - set(data.chain_order))
    spans, gaps, ticks, x = {}, {}, [], 0.0
    by_name = {f.file: f for f in data.files}
    for name in order:
        if name in gap_before:
            gaps[name] = (x, x + 0.6)
            x += 0.6
        spans[name] = (x, x + 1.0)
        started = by_name[name].first_event_time if name in by_name else None
        ticks.append((x + 0.5, name + (f"<br>{started:%Y-%m-%d %H:%M:%S}" if started else "")))
        x += 1.0
    return Axis(by_time=False, spans=spans, gaps=gaps, ticks=tuple(ticks))


def _interval_span(axis: Axis, first_file: str, last_file: str) -> tuple[Any, Any] | None:
    start, end = axis.spans.get(first_file), axis.spans.get(last_file)
    if start is None or end is None:
        return None
    return start[0], max(end[1], start[1])


def _finding_span(axis: Axis, finding: Finding) -> tuple[Any, Any] | None:
    """A GAP lies before the file that noticed it; the other findings are that file."""
    if finding.status == "GAP" and finding.file in axis.gaps:
        return axis.gaps[finding.file]
    return axis.spans.get(finding.file)


def lanes_of(data: CoverageData) -> list[str]:
    """Lanes in a stable order: those with coverage, then those only problems mention."""
    lanes = [i.lane for i in data.intervals]
    for finding in data.findings:
        lanes += lanes_of_gtid_set(finding.gtids)
    lanes = list(dict.fromkeys(lanes))
    return lanes or ["(no GTIDs)"]


def build_figure(data: CoverageData) -> Any:
    """The plotly figure: grey files, green held intervals, red bands and labels for each finding."""
    import plotly.graph_objects as go

    lanes = lanes_of(data)
    axis = build_axis(data)
    fig = go.Figure()
    for name, span in axis.spans.items():  # the top lane: the archived files themselves
        bar = _bar(len(lanes), span, FILE_COLOUR, name, name)
        bar.update(text=[name], textposition="inside", insidetextanchor="middle")
        fig.add_trace(bar)
    for interval in data.intervals:
        held = _interval_span(axis, interval.first_file, interval.last_file)
        if held is not None:
            fig.add_trace(_bar(lanes.index(interval.lane), held, OK_COLOUR, interval.gtid_set,
                               f"{interval.gtid_set}<br>{interval.transactions} transactions<br>"
                               f"{interval.first_file} … {interval.last_file}"))
    for number, finding in enumerate(data.findings):
        _add_finding(fig, axis, finding, [lanes.index(lane) for lane in lanes_of_gtid_set(finding.gtids)]
                     or list(range(len(lanes))), above=number % 2 == 0)
    _layout(fig, data, lanes, axis)
    return fig


def _x(value: Any) -> Any:
    return value.isoformat() if isinstance(value, dt.datetime) else value


def _bar(lane_index: int, span: tuple[Any, Any], colour: str, name: str, hover: str) -> Any:
    import plotly.graph_objects as go

    start, end = span
    length = (end - start).total_seconds() * 1000 if isinstance(start, dt.datetime) else end - start
    return go.Bar(
        base=[_x(start)], x=[length], y=[lane_index], orientation="h", marker_color=colour, name=name,
        hovertext=[hover], hoverinfo="text", showlegend=False, width=0.5,
        marker_line={"color": "white", "width": 1})


def _add_finding(fig: Any, axis: Axis, finding: Finding, lane_indexes: Sequence[int], above: bool = True) -> None:
    """Red bars in the finding's lanes; its label above them (every other one below, so neighbours never overlap)."""
    span = _finding_span(axis, finding)
    if span is None:
        return
    start, end = span
    for index in lane_indexes:
        fig.add_trace(_bar(index, span, PROBLEM_COLOUR, finding.status,
                           html.escape(finding.label) + (f"<br>{html.escape(finding.detail)}" if finding.detail else "")))
    if finding.status == "CHAIN_BREAK":
        fig.add_vline(x=_x(start), line_color=PROBLEM_COLOUR, line_dash="dash")
    fig.add_annotation(
        x=_x(start + (end - start) / 2), y=max(lane_indexes) + 0.3 if above else min(lane_indexes) - 0.3,
        text=html.escape(finding.label), showarrow=False, font={"color": PROBLEM_COLOUR, "size": 13},
        yanchor="bottom" if above else "top",
        bgcolor="rgba(255,255,255,0.85)", bordercolor=PROBLEM_COLOUR, borderwidth=1)


def _layout(fig: Any, data: CoverageData, lanes: Sequence[str], axis: Axis) -> None:
    problems = len(data.findings)
    verdict = "no gaps, duplicates or chain breaks" if not problems else f"{problems} problem(s) in red"
    xaxis: dict[str, Any]
    if axis.by_time:
        xaxis = {"type": "date", "title": "event time (UTC)", "gridcolor": "#eee"}
    else:
        xaxis = {"type": "linear", "tickvals": [v for v, _ in axis.ticks], "ticktext": [t for _, t in axis.ticks],
                 "title": "files in chain order, first event time (UTC) under each (event times too close "
                          "to draw to scale)", "showgrid": False, "zeroline": False}
    fig.update_layout(
        title=f"binlake archive coverage · source {data.source} · {len(data.files)} files · {verdict}",
        barmode="overlay", height=280 + 110 * len(lanes), margin={"l": 40, "r": 40, "t": 80, "b": 80},
        plot_bgcolor="white", xaxis=xaxis,
        yaxis={"tickvals": list(range(len(lanes) + 1)), "ticktext": [*lanes, FILES_LANE], "automargin": True,
               "range": [-0.8, len(lanes) + 0.6], "title": "GTID source / domain"},
    )


def findings_table_html(data: CoverageData) -> str:
    """The findings as a plain HTML table under the chart (copy-paste friendly GTID sets and files)."""
    if not data.findings:
        return "<p id='findings'>No gaps, duplicates or chain breaks.</p>"
    rows = "".join(
        f"<tr class='finding'><td>{html.escape(f.status)}</td><td>{html.escape(f.file)}</td>"
        f"<td>{html.escape(f.gtids)}</td><td>{html.escape(', '.join(f.missing_files))}</td>"
        f"<td>{html.escape(f.detail)}</td></tr>" for f in data.findings)
    return ("<table id='findings' border='1' cellpadding='4' style='border-collapse:collapse;font-family:sans-serif'>"
            "<tr><th>status</th><th>file</th><th>GTIDs</th><th>missing files</th><th>detail</th></tr>"
            f"{rows}</table>")


def write_html(data: CoverageData, path: Path) -> Path:
    """A self-contained page (plotly.js inline) with the timeline and the findings table."""
    fig = build_figure(data)
    chart = fig.to_html(full_html=False, include_plotlyjs=True, div_id="coverage", config={"displaylogo": False})
    page = ("<!DOCTYPE html><html><head><meta charset='utf-8'>"
            f"<title>binlake coverage · {html.escape(data.source)}</title></head>"
            f"<body style='margin:0;background:white'>{chart}{findings_table_html(data)}</body></html>")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page, encoding="utf-8")
    return path


def chromium_binary() -> str:
    """The headless browser used for PNGs and tests (Debian's ``chromium``)."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    raise BinlakeError("no chromium on PATH (needed for the PNG): apt-get install chromium, or use --no-png")


def run_chromium(*extra: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Headless Chromium with ``extra`` arguments, touching no network and no profile of the user's.

    Its profile is a temporary folder removed afterwards: a few MB a run that used to be left in
    the temp dir, a thousand times over in the test runs."""
    with tempfile.TemporaryDirectory(prefix="binlake-chromium-") as profile:
        args = [chromium_binary(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
                f"--user-data-dir={profile}", *extra]
        proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout, check=False)
    if proc.returncode != 0:
        raise BinlakeError(f"chromium failed (exit {proc.returncode}): {proc.stderr.strip()[-300:]}")
    return proc


def screenshot(html_path: Path, png_path: Path, width: int, height: int) -> Path:
    """PNG of the page as Chromium renders it (after plotly's JS drew the chart)."""
    run_chromium(f"--window-size={width},{height}", "--virtual-time-budget=10000",
                 f"--screenshot={png_path}", html_path.resolve().as_uri())
    return png_path


def write_coverage_report(cfg: BinlakeConfig, source: str, out_dir: Path, *, png: bool = True) -> CoverageReport:
    """``coverage-SOURCE.html`` (and ``.png``) under ``out_dir``."""
    return render_coverage_report(load_coverage(cfg, source), source, out_dir, png=png)


def render_coverage_report(data: CoverageData, source: str, out_dir: Path, *, png: bool = True) -> CoverageReport:
    """The page of ``data`` (from :func:`load_coverage`): a function of ``data`` alone, so a page
    drawn from equal data can be reused (:func:`binlake.runs.write_coverage_pages`)."""
    html_path = write_html(data, Path(out_dir) / f"coverage-{source}.html")
    png_path = None
    if png:
        height = 280 + 110 * len(lanes_of(data)) + 60 + 30 * max(len(data.findings), 1)
        png_path = screenshot(html_path, html_path.with_suffix(".png"), 1400, height)
    return CoverageReport(html_path=html_path, png_path=png_path)
