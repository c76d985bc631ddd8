"""``python -m binlog_parser``: print the events of binlog files as JSON lines (or text).

Exit status: 0 when every file decoded to its end, 2 on a format error (the events
before it are printed; ``file:offset: message`` goes to stderr), 1 on other errors
(missing file...), 3 when ``--resync`` stepped over bad events (each skipped byte range is
printed in place of the event, as a ``SKIPPED_BYTES`` JSON line or a ``# skipped`` text line,
and named on stderr) and nothing worse happened.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence

from binlog_parser.errors import BinlogError
from binlog_parser.framing import ON_ERROR_RAISE, ON_ERROR_RESYNC, SkippedBytes
from binlog_parser.reader import read_records
from binlog_parser.render import event_to_dict, event_to_text


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m binlog_parser",
                                description="Decode MySQL/MariaDB binlog files into JSON lines.")
    p.add_argument("files", nargs="+", metavar="FILE")
    p.add_argument("--verify-checksum", dest="verify", action="store_true", default=True,
                   help="verify CRC32 trailers when the FORMAT_DESCRIPTION declares them (default)")
    p.add_argument("--no-verify-checksum", dest="verify", action="store_false",
                   help="do not verify checksums (checksum_ok is then null)")
    p.add_argument("--lenient", action="store_true",
                   help="a checksum mismatch sets checksum_ok=false instead of stopping")
    p.add_argument("--start-position", type=int, default=None, metavar="N",
                   help="first event at or after offset N (first file only)")
    p.add_argument("--stop-position", type=int, default=None, metavar="N",
                   help="stop at the first event at or after offset N (last file only)")
    p.add_argument("--text", action="store_true", help="mysqlbinlog-like text instead of JSON")
    p.add_argument("--resync", action="store_true",
                   help="step over a bad event (like mysqlbinlog --force-read) and go on at the next "
                        "event boundary; skipped byte ranges are printed and the exit status is 3")
    return p


def skipped_to_dict(skip: SkippedBytes, path: str) -> dict[str, object]:
    """The JSON line printed in place of a skipped byte range."""
    return {"type": "SKIPPED_BYTES", "file": path, "start": skip.start, "end": skip.end,
            "bytes": skip.size, "found_by": skip.found_by, "error_class": type(skip.error).__name__,
            "error": skip.error.message, "head_hex": skip.head[:64].hex()}


def skipped_to_text(skip: SkippedBytes) -> str:
    return (f"# at {skip.start}\n# skipped {skip.size} bytes ({skip.start}-{skip.end}): "
            f"{skip.error.message}; next event found by {skip.found_by.replace('_', ' ')}")


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    out = sys.stdout
    dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
    n = len(args.files)
    on_error = ON_ERROR_RESYNC if args.resync else ON_ERROR_RAISE
    skipped = 0
    try:
        for i, path in enumerate(args.files):
            start = args.start_position if i == 0 else None
            stop = args.stop_position if i == n - 1 else None
            payload_next: int | None = None
            try:
                for event in read_records(path, on_error=on_error, verify_checksum=args.verify,
                                          lenient=args.lenient, start_position=start, stop_position=stop):
                    if isinstance(event, SkippedBytes):
                        skipped += 1
                        sys.stderr.write(f"{event.error} (skipped bytes {event.start}-{event.end})\n")
                        out.write((skipped_to_text(event) if args.text
                                   else dumps(skipped_to_dict(event, path))) + "\n")
                        continue
                    h = event.header
                    if h.payload_pos is None and h.type_code == 40:
                        payload_next = h.next_pos
                    if args.text:
                        out.write(event_to_text(event) + "\n")
                    else:
                        out.write(dumps(event_to_dict(event, path, payload_next_pos=payload_next)) + "\n")
            except BinlogError as exc:
                out.flush()
                sys.stderr.write(f"{exc}\n")
                return 2
            except BrokenPipeError:
                raise
            except OSError as exc:
                out.flush()
                sys.stderr.write(f"{path}: {exc.strerror or exc}\n")
                return 1
        out.flush()
    except BrokenPipeError:
        # The reader of our stdout went away (``| head``): point stdout at /dev/null so the
        # interpreter's final flush does not raise again, and end quietly as `cat` does.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    return 3 if skipped else 0
