"""The archiver's errors, all under :class:`binlake.errors.BinlakeError`.

Why one module: the command line and the service tell "retry later" (:class:`ArchiverError`,
:class:`ArchiverLeaseHeld`) from "an operator must act" (:class:`ArchiverFatalError`, exit 2) by
class; the files, the guard and the archiver raise them, and callers import them from here.
"""

from __future__ import annotations

from binlake.errors import BinlakeError


class ArchiverError(BinlakeError):
    """The archiver cannot go on (bad settings, the server refused the replica)."""


class ArchiverFatalError(ArchiverError):
    """Retrying cannot help, an operator must act (a different server, an unsafe file name, a broken
    spool): the status says failed and the command exits 2 (see :func:`binlake.archive.archiver.exit_code_of`)."""


class BinlogPurgedError(ArchiverFatalError):
    """The server no longer has the binlog (or GTIDs) the archive needs next: the archive has a gap."""


class DifferentServerError(ArchiverFatalError):
    """The server is not the one the archived series came from (failover, RESET MASTER, rebuilt host)."""


class ArchiveFileError(BinlakeError):
    """The stream does not continue the archived file (a gap or overlap at a named byte offset)."""


class UnsafeBinlogNameError(ArchiveFileError):
    """The server named a binlog file that is not a plain ``basename.NNNNNN`` (a path, a control
    character, an impossible length): nothing is written under it."""


class ArchiveConflictError(ArchiveFileError):
    """The destination's object is not the one this archiver last wrote (another archiver writes
    it), or a new file would overwrite a closed archived one."""


class ArchiverGuardError(BinlakeError):
    """Another archiver holds the spool or the destination, or the lease was lost."""


class ArchiverLeaseHeld(ArchiverGuardError):
    """Another live archiver holds the destination's lease (retrying later is the way forward)."""
