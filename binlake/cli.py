"""The ``binlake`` console script: ``binlake sql``, ``binlake config``, ``binlake demo``,
``binlake generate``."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from typing import Sequence

USAGE = """usage: binlake COMMAND [ARGS]

commands:
  sql [QUERY]   Spark SQL over the binlake Delta tables (no QUERY: interactive prompt)
  config        print the resolved configuration (no secrets are ever in it)
  demo          the end-to-end demo (same as `make demo`)
  generate DEST synthetic binlog archive + ground truth (binlake generate --help)
  archive       stream a live server's binlogs into the archive (binlake archive --help)
"""


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "help"):
        print(USAGE)
        return 0 if args else 2
    command, rest = args[0], args[1:]
    if command == "sql":
        from binlake.sql_cli import main as sql_main

        return sql_main(rest)
    if command == "config":
        from binlake.config import load_config

        print(json.dumps(asdict(load_config(rest[0] if rest else None)), indent=2, default=str))
        return 0
    if command == "demo":
        from binlake.demo import main as demo_main

        return demo_main(rest)
    if command == "generate":
        return _generate(rest)
    if command == "archive":
        from binlake.archiver import archive_command

        return archive_command(rest)
    print(f"unknown command {command!r}\n\n{USAGE}", file=sys.stderr)
    return 2


def _generate(rest: list[str]) -> int:
    """``binlake generate``: :mod:`binlake.synthetic` (archive generator with fault switches)."""
    import argparse

    from binlake.synthetic import build_parser, run_args

    parser = build_parser(argparse.ArgumentParser(
        prog="binlake generate",
        description="Generate a synthetic MySQL binlog archive with ground truth."))
    return run_args(parser.parse_args(rest))


if __name__ == "__main__":
    raise SystemExit(main())
