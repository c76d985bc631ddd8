"""Walking a binlog chain: follow "next file" pointers from a start until they run out.

The one walk behind discovery's chain segments (:func:`binlake.discovery.discover.build_chain`) and
reconciliation's file order (:func:`binlake.reconcile.coverage.chain_order`): both follow each
file's successor (named by its ROTATE, or the next number after a STOP) and stop at a file
that is not there or already placed; what they do between walks (where the next walk starts)
is theirs.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import TypeVar

K = TypeVar("K", bound=Hashable)


def follow_chain(start: K, successor: Callable[[K], K | None], placed: set[K]) -> list[K]:
    """``start`` and its successors, in order, until one is None or already in ``placed``
    (every returned item is added to ``placed``)."""
    out: list[K] = []
    item: K | None = start
    while item is not None and item not in placed:
        placed.add(item)
        out.append(item)
        item = successor(item)
    return out
