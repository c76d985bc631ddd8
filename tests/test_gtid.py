"""GtidSet / Gtid / MariaGtid / MariaGtidList: text, binary, algebra (with hypothesis)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from binlog_parser.gtid import Gtid, GtidParseError, GtidSet, MariaGtid, MariaGtidList

U1 = "b8ae2fd2-3005-11f0-8be8-0242ac150002"
U2 = "55778904-0299-11f1-b1b8-4ef0c4956feb"

SEED_UNTAGGED = bytes.fromhex(
    "0100000000000000b8ae2fd2300511f08be80242ac150002"
    "0100000000000000" "0100000000000000" "0c00000000000000")
SEED_TAGGED = bytes.fromhex(
    "0102000000000001" "5577890402991" "1f1b1b84ef0c4956feb" "00" "0100000000000000"
    "0100000000000000" "0e00000000000000"
    "5577890402991" "1f1b1b84ef0c4956feb" "0a" "6d79746167" "0100000000000000"
    "0100000000000000" "0300000000000000")


def test_seed_untagged_previous_gtids() -> None:
    gs, tagged = GtidSet.decode(SEED_UNTAGGED)
    assert not tagged
    assert str(gs) == f"{U1}:1-11"  # end 12 on disk is exclusive
    assert gs.count() == 11
    assert gs.encode() == SEED_UNTAGGED


def test_seed_tagged_previous_gtids() -> None:
    gs, tagged = GtidSet.decode(SEED_TAGGED)
    assert tagged
    assert str(gs) == f"{U2}:1-13:mytag:1-2"
    assert list(gs) == [(U2, "", 1, 13), (U2, "mytag", 1, 2)]
    assert gs.encode() == SEED_TAGGED
    assert len(gs) == 15


def test_canonical_text() -> None:
    gs = GtidSet.from_text(f" {U2}:7:1-5:3 , {U1.upper()}:4:MyTag:2-3:1,\n{U2}:TAG_b:9 ")
    # sorted by uuid then tag (untagged first), intervals merged, tags lower-cased
    assert str(gs) == f"{U2}:1-5:7:tag_b:9,{U1}:4:mytag:1-3"
    assert gs.to_string(newlines=True).count(",\n") == 1
    assert GtidSet.from_text(str(gs)) == gs
    assert str(GtidSet.from_text("")) == ""
    assert GtidSet.from_text(f"{U1}:1-3:4-6") == GtidSet.from_text(f"{U1}:1-6")
    assert str(GtidSet.from_text(f"{U1}:5:3:4")) == f"{U1}:3-5"
    assert str(GtidSet.from_text(f"{'{'}{U1.replace('-', '')}{'}'}:1")) == f"{U1}:1"


@pytest.mark.parametrize("bad", [
    f"{U1}:0", f"{U1}:5-3", f"{U1}:x-1", "nonsense:1", f"{U1}:1,,", f"{U1}:9tag:1",
    f"{U1}:{'a' * 33}:1", f"{U1}:9223372036854775808", f"{U1}:ta-g:1",
])
def test_bad_text(bad: str) -> None:
    with pytest.raises(GtidParseError):
        GtidSet.from_text(bad)


def test_tag_rules() -> None:
    assert str(GtidSet.from_text(f"{U1}:_A1:1")) == f"{U1}:_a1:1"
    assert str(GtidSet.from_text(f"{U1}:{'x' * 32}:1")) == f"{U1}:{'x' * 32}:1"


def test_operations() -> None:
    a = GtidSet.from_text(f"{U1}:1-10:20-30,{U2}:1-5")
    b = GtidSet.from_text(f"{U1}:5-25,{U2}:mytag:1-2")
    assert str(a | b) == str(GtidSet.from_text(f"{U1}:1-30,{U2}:1-5:mytag:1-2"))
    assert str(a & b) == str(GtidSet.from_text(f"{U1}:5-10:20-25"))
    assert str(a - b) == str(GtidSet.from_text(f"{U1}:1-4:26-30,{U2}:1-5"))
    assert f"{U1}:7" in a and f"{U1}:15" not in a
    assert Gtid(U1, 20) in a and (U2, None, 5) in a and (U2, "mytag", 1) not in a
    assert a.contains(f"{U1}:2-3")
    assert GtidSet.from_text(f"{U1}:2-3") <= a
    assert not b.issubset(a)
    assert a.add(U1, None, 11) == GtidSet.from_text(f"{U1}:1-11:20-30,{U2}:1-5")
    assert a.add(U2, "T", 3).intervals(U2, "t") == ((3, 3),)
    assert a.count() == 10 + 11 + 5
    assert GtidSet().is_empty and not GtidSet() and a
    assert hash(a) == hash(GtidSet.from_text(str(a)))
    assert a == str(a)


def test_from_gtids() -> None:
    gs = GtidSet.from_gtids([f"{U1}:3", Gtid(U1, 1), (U1, None, 2), (U2, "x", 9), f"{U1}:3"])
    assert str(gs) == str(GtidSet.from_text(f"{U1}:1-3,{U2}:x:9"))
    big = GtidSet.from_gtids((U1, None, i) for i in range(1, 100001) if i != 500)
    assert str(big) == f"{U1}:1-499:501-100000"


def test_gtid_parse() -> None:
    assert str(Gtid.parse(f"{U1.upper()}:12")) == f"{U1}:12"
    assert str(Gtid.parse(f"{U2}:MyTag:3")) == f"{U2}:mytag:3"
    with pytest.raises(GtidParseError):
        Gtid.parse(f"{U1}")


def test_decode_rejects_garbage() -> None:
    with pytest.raises(GtidParseError):
        GtidSet.decode(b"\x01\x00")
    with pytest.raises(GtidParseError):
        GtidSet.decode(b"\xff" * 8)  # absurd SID count
    with pytest.raises(GtidParseError):
        GtidSet.decode(SEED_UNTAGGED + b"\x00")  # trailing bytes
    bad_interval = SEED_UNTAGGED[:-8] + (1).to_bytes(8, "little")  # [1, 1): empty
    with pytest.raises(GtidParseError):
        GtidSet.decode(bad_interval)


def test_maria() -> None:
    lst = MariaGtidList.from_text("0-1-10,1-2-5")
    assert str(lst) == "0-1-10,1-2-5"
    assert list(lst) == [MariaGtid(0, 1, 10), MariaGtid(1, 2, 5)]
    assert MariaGtid.parse("0-1-9") in lst and "1-2-6" not in lst
    assert str(lst.advance(MariaGtid(0, 1, 11))) == "0-1-11,1-2-5"
    assert str(MariaGtidList.from_text("")) == ""
    with pytest.raises(GtidParseError):
        MariaGtid.parse("0-1")


# ---------------------------------------------------------------------------
# hypothesis: the algebra agrees with Python sets of (uuid, tag, gno)
# ---------------------------------------------------------------------------

UUIDS = [U1, U2, "00000000-0000-0000-0000-000000000001"]
TAGS = ["", "a", "zz_9"]
gtid_st = st.tuples(st.sampled_from(UUIDS), st.sampled_from(TAGS), st.integers(1, 60))
set_st = st.frozensets(gtid_st, max_size=40)


def mk(s: frozenset) -> GtidSet:  # type: ignore[type-arg]
    return GtidSet.from_gtids(s)


def expand(g: GtidSet) -> set:  # type: ignore[type-arg]
    return {(u, t, n) for u, t, s, e in g for n in range(s, e + 1)}


@settings(max_examples=300, deadline=None)
@given(set_st, set_st)
def test_algebra_matches_python_sets(a: frozenset, b: frozenset) -> None:  # type: ignore[type-arg]
    ga, gb = mk(a), mk(b)
    assert expand(ga) == set(a)
    assert expand(ga | gb) == a | b
    assert expand(ga & gb) == a & b
    assert expand(ga - gb) == a - b
    assert expand(ga ^ gb) == a ^ b
    assert ga.issubset(gb) == (a <= b)
    assert (ga == gb) == (a == b)
    assert len(ga) == len(a)
    assert ga.is_empty == (not a)
    for g in list(a)[:5]:
        assert g in ga
        assert ga.add(*g) == ga
    # text and binary round trips
    assert GtidSet.from_text(str(ga)) == ga
    assert GtidSet.decode(ga.encode(tagged=True))[0] == ga
    if not any(t for _, t, _ in a):
        assert GtidSet.decode(ga.encode())[0] == ga


@settings(max_examples=150, deadline=None)
@given(set_st, set_st, set_st)
def test_algebra_laws(a: frozenset, b: frozenset, c: frozenset) -> None:  # type: ignore[type-arg]
    ga, gb, gc = mk(a), mk(b), mk(c)
    assert (ga | gb) | gc == ga | (gb | gc)
    assert ga & (gb | gc) == (ga & gb) | (ga & gc)
    assert (ga - gb) | (ga & gb) == ga
    assert ((ga - gb) & gb).is_empty
    # canonical text: intervals sorted, merged (no two adjacent) and single GNOs bare
    for _u, _t, s, e in ga:
        assert 1 <= s <= e
    ivs = list(ga)
    for (u1, t1, _s1, e1), (u2, t2, s2, _e2) in zip(ivs, ivs[1:]):
        if (u1, t1) == (u2, t2):
            assert s2 > e1 + 1
        else:
            assert (u1, t1) < (u2, t2)
