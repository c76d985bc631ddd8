"""The thin I/O edge of the decoder: open a binlog file by path.

Everything else in ``binlog_parser`` works on bytes or on a stream it is given; this module
is the only one that opens files, so that what touches the file system is one place.
"""

from __future__ import annotations

import os
from typing import BinaryIO


def open_binlog_file(path: str | os.PathLike[str], position: int = 0) -> tuple[BinaryIO, int]:
    """(unbuffered binary stream at ``position``, file size): the caller closes the stream."""
    f = open(path, "rb", buffering=0)  # noqa: SIM115 - handed to the caller, who closes it
    try:
        size = os.fstat(f.fileno()).st_size
        if position:
            f.seek(position)
        return f, size
    except BaseException:
        f.close()
        raise
