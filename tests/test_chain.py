"""binlake.discovery.chain.follow_chain: the one walk along "next file" pointers."""

from __future__ import annotations

from binlake.discovery.chain import follow_chain


def test_follows_until_missing_or_placed() -> None:
    succ = {"b.1": "b.2", "b.2": "b.3", "b.3": "b.1", "x.1": "gone"}
    placed: set[str] = set()
    assert follow_chain("b.1", succ.get, placed) == ["b.1", "b.2", "b.3"]  # stops at the loop
    assert follow_chain("b.2", succ.get, placed) == []
    assert follow_chain("x.1", lambda n: succ.get(n) if succ.get(n) in succ else None, placed) == ["x.1"]
    assert placed == {"b.1", "b.2", "b.3", "x.1"}
