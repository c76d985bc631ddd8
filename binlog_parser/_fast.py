"""Constructors for the hot frozen ``slots`` dataclasses.

A frozen dataclass's ``__init__`` sets each field through ``object.__setattr__`` (a global and
an attribute lookup plus a call per field). ``slots_constructor(cls)`` returns a positional
function taking *every* field in order that sets the slots directly: about twice as fast, and
the instance is the same one ``cls(...)`` builds (same type, equality, hash, repr). Only for
classes whose ``__init__`` does nothing else (no ``__post_init__``, no field conversions).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any


def slots_constructor(cls: type) -> Callable[..., Any]:
    names = tuple(f.name for f in dataclasses.fields(cls))
    # every field is a slot of this very class (a subclass's slots are its own fields only)
    slot_names: list[str] = []
    for klass in reversed(cls.__mro__):
        slot_names.extend(klass.__dict__.get("__slots__", ()))
    if sorted(slot_names) != sorted(names) or hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__name__}: not a plain frozen slots dataclass")
    native = _native_constructor(cls)
    if native is not None:
        return native
    ns: dict[str, Any] = {"new": object.__new__, "cls": cls}
    for i, name in enumerate(names):
        owner = next(k for k in cls.__mro__ if name in k.__dict__.get("__slots__", ()))
        ns[f"s{i}"] = owner.__dict__[name].__set__
    src = "\n".join([
        f"def make({', '.join(f'a{i}' for i in range(len(names)))}):",
        "    o = new(cls)",
        *[f"    s{i}(o, a{i})" for i in range(len(names))],
        "    return o"])
    exec(compile(src, f"<{cls.__name__} constructor>", "exec"), ns)
    make = ns["make"]
    make.__doc__ = f"{cls.__name__}({', '.join(names)}), every field given, positionally."
    return make


def _native_constructor(cls: type) -> Callable[..., Any] | None:
    """The same constructor compiled (``binlog_parser._native_ext.SlotsConstructor``: allocate,
    store every slot, no Python frame) when the extension is built and enabled (docs/native.md)."""
    from binlog_parser._native_loader import load_extension

    ext = load_extension()
    if ext is None:
        return None
    try:
        return ext.SlotsConstructor(cls)  # type: ignore[no-any-return,unused-ignore]
    except (TypeError, ValueError):  # a slot layout it does not know: the Python constructor
        return None
