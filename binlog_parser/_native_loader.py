"""Finds the optional compiled extension ``binlog_parser._native_ext`` (built from ``native/`` by
``make setup-native``; see docs/native.md).

One place decides whether it is used: it must be importable, speak this revision's interface
(``ABI``; a library built from another revision of ``native/`` is ignored, never trusted), and
``BINLAKE_NATIVE`` must not be ``0`` / ``false`` / ``no`` / ``off``.

:func:`switch` / :func:`active_extension` hold the run-time choice that
``binlog_parser.rows._native.use_native`` makes, so the rows bridge and the framing bridge
(``binlog_parser._native_framing``) are switched together.
"""

from __future__ import annotations

import os
from types import ModuleType
from typing import Any

#: the extension interface this tree speaks (``_native_ext.ABI``, native/src/lib.rs)
ABI = 14
_UNSET: Any = object()


def native_disabled() -> bool:
    """True when ``BINLAKE_NATIVE`` turns the extension off."""
    return os.environ.get("BINLAKE_NATIVE", "1").strip().lower() in ("0", "false", "no", "off")


def load_extension(*, ignore_environment: bool = False) -> ModuleType | None:
    """The extension module, or None (not built, another revision, or switched off)."""
    if native_disabled() and not ignore_environment:
        return None
    try:
        from binlog_parser import _native_ext
    except ImportError:
        return None
    if getattr(_native_ext, "ABI", None) != ABI:
        return None
    return _native_ext


class _Active:
    module: ModuleType | None = _UNSET


def switch(enabled: bool | None) -> ModuleType | None:
    """Use the extension (True: if built), not (False), or as the environment says (None);
    returns the module now in use."""
    if enabled is None:
        module = load_extension()
    else:
        module = load_extension(ignore_environment=True) if enabled else None
    _Active.module = module
    return module


def active_extension() -> ModuleType | None:
    """The extension as last :func:`switch`-ed (first call: as the environment says)."""
    if _Active.module is _UNSET:
        return switch(None)
    return _Active.module
