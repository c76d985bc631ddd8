"""The typed hand-overs between the steps of a run: discover -> decode -> reconcile -> gold ->
data checks -> summary.

Each step returns one frozen dataclass and stores it in the run folder (:mod:`binlake.runs`) as a
JSON document; the next step reads it back as the same class. Why frozen dataclasses: a step
cannot change what an earlier one reported, and a misspelt field is a type error, not a silent
``None`` from ``dict.get``. The JSON conversion (nested tuples, unknown keys of an older document
ignored, wrong types refused) is pydantic's ``TypeAdapter`` rather than hand-written.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

R = TypeVar("R")


_ADAPTERS: dict[type, Any] = {}


def _adapter(cls: type) -> Any:
    """pydantic's (cached: building one costs milliseconds) converter for a result class."""
    if cls not in _ADAPTERS:
        from pydantic import TypeAdapter

        _ADAPTERS[cls] = TypeAdapter(cls)
    return _ADAPTERS[cls]


def to_doc(result: Any) -> dict[str, Any]:
    """A step result as a JSON-able dict (what the run folder and Airflow's XCom hold)."""
    doc: dict[str, Any] = _adapter(type(result)).dump_python(result, mode="json")
    return doc


def from_doc(cls: type[R], doc: Mapping[str, Any]) -> R:
    """A run-folder document read back as its result class (keys it does not know are ignored)."""
    result: R = _adapter(cls).validate_python(dict(doc))
    return result


@dataclass(frozen=True)
class BinlogObject:
    """One archived binlog object the decode step ingests; ``file`` defaults to the URI's last part."""

    source: str
    uri: str
    size: int
    etag: str | None = None
    file: str = ""

    def __post_init__(self) -> None:
        if not self.file:
            object.__setattr__(self, "file", self.uri.rstrip("/").rsplit("/", 1)[-1])


@dataclass(frozen=True)
class RunPlan:
    """What one run ingests for one source (``plan`` document), and whether it only pretends."""

    source: str
    run_id: str
    mode: str
    force: bool = False
    dry_run: bool = False
    files: tuple[BinlogObject, ...] = ()
    skipped: tuple[str, ...] = ()
    reasons: dict[str, str] = field(default_factory=dict)
    range: dict[str, Any] = field(default_factory=dict)

    @property
    def file_names(self) -> list[str]:
        return [f.file for f in self.files]


@dataclass(frozen=True)
class DiscoverResult:
    """The discover task's result (Airflow XCom): counts and the first names, not every file."""

    source: str
    mode: str
    dry_run: bool
    objects: int
    bytes_read: int
    seconds: float
    to_ingest: int
    files: tuple[str, ...]
    skipped: int
    errors: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    chain_broken: bool = False


@dataclass(frozen=True)
class RunDiscovery:
    """The run's one discover task over all its sources (Airflow XComs, one per field).

    Why one task and not one per source: a task instance costs a Python process, Airflow's task
    runner and a DAG parse (seconds of CPU), and on a routine night most sources of a fleet have
    nothing new. So the discover task discovers every source and finishes in its own process each
    source no step of which needs Spark (``settled``: nothing new, nothing to report); the
    per-source tasks run only for ``busy`` sources: work for Spark, a stored GAP to report again
    (and alert), or a discovery that failed (``failed``: its first step fails with the reason)."""

    sources: tuple[str, ...]
    busy: tuple[str, ...] = ()
    settled: tuple[str, ...] = ()
    found: tuple[DiscoverResult, ...] = ()
    failed: dict[str, str] = field(default_factory=dict)
    #: why each busy source's tasks run ("decode has work", "gold has work", "ChainBrokenError: ...")
    reasons: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class DecodeResult:
    """The decode step (``decode`` document). ``spark`` is False when no Spark ran: a dry run, or
    nothing new to ingest."""

    source: str
    dry_run: bool = False
    mode: str = "nightly"
    files: int = 0
    skipped: int = 0
    ingested: tuple[str, ...] = ()
    rows: dict[str, int] = field(default_factory=dict)
    quarantined: int = 0
    bytes: int = 0
    seconds: float = 0.0
    failed: tuple[str, ...] = ()
    partial: tuple[str, ...] = ()
    would_ingest: tuple[str, ...] = ()
    next_file_filled: tuple[str, ...] = ()
    spark: bool = True
    ok: bool = True


@dataclass(frozen=True)
class ReconcileProblem:
    """One non-OK row of ``meta.gtid_reconciliation``."""

    source: str
    file: str
    status: str
    missing_gtids: str = ""
    extra_gtids: str = ""
    missing_files: tuple[str, ...] = ()
    detail: str = ""


@dataclass(frozen=True)
class ReconcileResult:
    """The reconcile step (``reconcile`` document). ``persisted``: nothing new was ingested, so the
    verdict was read from ``meta.gtid_reconciliation`` (delta-rs) instead of recomputed with Spark."""

    source: str
    dry_run: bool = False
    files: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    problems: tuple[ReconcileProblem, ...] = ()
    discovery_errors: tuple[str, ...] = ()
    persisted: bool = False
    spark: bool = True
    ok: bool = True


@dataclass(frozen=True)
class GoldStepResult:
    """The gold step (``gold`` document). ``written``: every gold table the step wrote (``gold.<name>``:
    per-source, ``__history`` and union tables; not those left unchanged), in full rather than cut
    at the XCom limit like ``names``: the gold task emits one Airflow asset event per entry, and in
    submit mode it learns them from this document."""

    source: str
    dry_run: bool = False
    tables: int = 0
    write_modes: dict[str, int] = field(default_factory=dict)
    rows: int = 0
    schema_versions: int = 0
    names: tuple[str, ...] = ()
    written: tuple[str, ...] = ()
    seconds: float = 0.0
    spark: bool = True
    ok: bool = True
    #: gold tables whose schema cannot be known (``meta.gold_status.schema_status``): ``gold.<name>: why``
    unknown_schemas: tuple[str, ...] = ()


@dataclass(frozen=True)
class ChecksResult:
    """The data checks (``checks`` document)."""

    source: str
    checked_files: int = 0
    failures: tuple[str, ...] = ()
    note: str = ""
    ok: bool = True


@dataclass(frozen=True)
class SourceSummary:
    """One source's line of the run summary."""

    discovered: int | None
    planned: int | None
    ingested: int | None
    rows: dict[str, int] | None
    reconciliation: dict[str, int] | None
    gold_tables: int | None
    checks_ok: bool | None
    dry_run: bool
    ok: bool
    coverage_html: str | None = None
    coverage_png: str | None = None


@dataclass(frozen=True)
class RunSummary:
    """The run's verdict (``summary.json`` at the top of the run folder)."""

    run_id: str
    sources: dict[str, SourceSummary]
    problems: tuple[str, ...] = ()
    ok: bool = True
