"""``binlake asof`` and ``binlake flashback``: the command lines over :mod:`binlake.history`.

Both read the warehouse with delta-rs (no JVM). What the command did goes to stderr (the cut, how the
rows were computed, warnings, conflicts), the answer to stdout (rows, or the undo script), so either
can be piped: ``binlake flashback ... | mariadb shop``.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import TextIO

from binlake.errors import BinlakeError
from binlake.history.errors import HistoryError
from binlake.history.table_function import split_table


@dataclass(frozen=True)
class TableOptions:
    """What both commands start from: a source's table (``db.table``), always given first."""

    source: str
    table: str


@dataclass(frozen=True)
class AsofOptions(TableOptions):
    gtid: str | None = None
    time: str | None = None
    position: str | None = None
    config: str | None = None
    output_format: str = "table"
    to_delta: str | None = None
    overwrite: bool = False
    coverage_check: bool = True
    start: str = "nearest"


@dataclass(frozen=True)
class FlashbackOptions(TableOptions):
    gtid_range: str | None = None
    from_time: str | None = None
    to_time: str | None = None
    transactions: list[str] = field(default_factory=list)
    single_transaction: bool = False
    config: str | None = None
    coverage_check: bool = True


def _one(**given: str | None) -> tuple[str, str]:
    chosen = [(k, v) for k, v in given.items() if v]
    if len(chosen) != 1:
        names = ", ".join("--" + k for k in given)
        raise HistoryError(f"give exactly one of {names}")
    return chosen[0][0], str(chosen[0][1])


def run_asof(options: AsofOptions, out: TextIO | None = None, err: TextIO | None = None) -> int:
    from binlake.config import load_config
    from binlake.history.asof import table_as_of
    from binlake.history.moments import Moment
    from binlake.history.output import write_delta
    from binlake.sql.fast import QueryResult
    from binlake_cli.sql import print_result

    out, err = out or sys.stdout, err or sys.stderr
    kind, text = _one(gtid=options.gtid, time=options.time, position=options.position)
    db, table = split_table(options.table)
    cfg = load_config(options.config)
    answer = table_as_of(cfg, options.source, db, table, Moment(kind, text), coverage_check=options.coverage_check,
                         start=options.start)
    print(f"{db}.{table} of {options.source} at {answer.moment}: through {answer.cut.describe()}; "
          f"{answer.method}; {len(answer.rows)} row(s)", file=err)
    for warning, count in sorted(answer.warnings.items()):
        print(f"warning: {warning} (x{count})", file=err)
    if options.to_delta:
        written = write_delta(cfg, answer, options.to_delta, overwrite=options.overwrite)
        print(f"wrote {written} row(s) to the Delta table {options.to_delta}", file=err)
        return 0
    print_result(QueryResult(answer.columns, answer.rows), options.output_format, out)
    return 0


def run_flashback(options: FlashbackOptions, out: TextIO | None = None, err: TextIO | None = None) -> int:
    from binlake.config import load_config
    from binlake.history.undo import flashback, gtid_range, time_window, transactions

    out, err = out or sys.stdout, err or sys.stderr
    ways = [options.gtid_range is not None, bool(options.from_time or options.to_time), bool(options.transactions)]
    if sum(ways) != 1:
        raise HistoryError("give exactly one of --gtid-range, --from-time/--to-time, --transaction")
    if options.gtid_range is not None:
        selection = gtid_range(options.gtid_range)
    elif options.transactions:
        selection = transactions(options.transactions)
    else:
        selection = time_window(options.from_time, options.to_time)
    db, table = split_table(options.table)
    undo = flashback(load_config(options.config), options.source, db, table, selection,
                     coverage_check=options.coverage_check)
    print(f"undo of {len(undo.undone)} transaction(s) ({undo.undone[0].describe()} .. "
          f"{undo.undone[-1].describe()}) on {db}.{table}: {len(undo.statements)} statement(s)", file=err)
    for conflict in undo.conflicts:
        print(f"warning: {conflict}: the undo overwrites it", file=err)
    out.write(undo.script(options.single_transaction))
    out.flush()
    return 0


__all__ = ["AsofOptions", "BinlakeError", "FlashbackOptions", "run_asof", "run_flashback", "split_table"]
