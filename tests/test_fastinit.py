"""``fast_init``: the same objects as the dataclass's own ``__init__``, built faster.

Also pins the positional constructions on the hit path (store row, anchor,
hit) to the field names, so a reordered field cannot shift values silently.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import pytest

from clawkb.fastinit import fast_init
from clawkb.retrieve.hits import make_hit
from clawkb.store.repo import ChunkRow, _chunk_row
from clawkb.types import Anchor, Hit


def _pair() -> tuple[type, type]:
    """The same frozen class twice: with the generated ``__init__`` and with fast_init."""

    def make() -> type:
        @dataclasses.dataclass(frozen=True, slots=True)
        class P:
            a: int
            b: str
            c: tuple[int, ...] = ()
            d: float | None = None

        return P

    return make(), fast_init(make())


def test_same_signature_values_equality_hash_and_frozenness() -> None:
    plain, fast = _pair()
    assert inspect.signature(plain) == inspect.signature(fast)
    for args, kwargs in [((1, "x"), {}), ((1,), {"b": "y", "d": 2.5}), ((), {"a": 3, "b": "z"})]:
        p, f = plain(*args, **kwargs), fast(*args, **kwargs)
        assert dataclasses.astuple(p) == dataclasses.astuple(f)
        assert repr(p).split("(", 1)[1] == repr(f).split("(", 1)[1]
        assert hash(f) == hash(fast(*args, **kwargs))
        assert f == fast(*args, **kwargs) and f != fast(99, "other")
    f = fast(1, "x")
    with pytest.raises(dataclasses.FrozenInstanceError):
        f.a = 2  # type: ignore[misc]
    assert dataclasses.replace(f, c=(1, 2)) == fast(1, "x", (1, 2))
    for bad in [(), (1, "x", (), None, "extra")]:
        with pytest.raises(TypeError):
            fast(*bad)
    with pytest.raises(TypeError):
        fast(1, "x", e=1)


def test_refuses_what_it_cannot_copy() -> None:
    @dataclasses.dataclass(slots=True)
    class NotFrozen:
        a: int

    @dataclasses.dataclass(frozen=True, slots=True)
    class Factory:
        a: list[int] = dataclasses.field(default_factory=list)

    @dataclasses.dataclass(frozen=True, slots=True)
    class Post:
        a: int

        def __post_init__(self) -> None:
            pass

    @dataclasses.dataclass(frozen=True)
    class NoSlots:
        a: int

    for cls in (NotFrozen, Factory, Post, NoSlots):
        with pytest.raises(TypeError):
            fast_init(cls)


def _distinct(cls: type) -> dict[str, Any]:
    """A distinct value for every field, so a shifted position shows."""
    return {f.name: f"{f.name}-value" for f in dataclasses.fields(cls)}


def test_chunk_row_from_a_store_row_keeps_every_column_in_its_field() -> None:
    values = _distinct(ChunkRow)
    values["heading_path"], values["metadata"] = ("Intro", "Pins"), {"board": "lx"}
    order = ["id", "doc_id", "path", "title", "anchor", "ordinal", "text", "heading_path",
             "line_start", "line_end", "page", "kind", "language", "metadata", "trust", "domain"]  # fmt: skip
    stored = {**values, "heading_path": '["Intro", "Pins"]', "metadata": '{"board": "lx"}'}
    row = _chunk_row([stored[n] for n in order])
    assert row == ChunkRow(**values)
    retired = _chunk_row([stored[n] for n in order[:14]])  # retired rows: no tier, no domain
    assert retired == ChunkRow(**{**values, "trust": None, "domain": None})


def test_anchor_and_hit_from_a_row_keep_every_field() -> None:
    values = _distinct(ChunkRow)
    values.update(heading_path=("H",), metadata={}, line_start=3, line_end=9, page=2)
    row = ChunkRow(**values)
    assert row.to_anchor() == Anchor(
        id=row.anchor, path=row.path, line_start=3, line_end=9, heading_path=("H",), page=2
    )
    h = make_hit(row, 4, 1.5, ["value"], {"why": 1}, snippet=False)
    assert h == Hit(
        rank=4, score=1.5, anchor=row.to_anchor(), text=row.text, title=row.title,
        kind=row.kind, matched_terms=(), snippet="", highlights=(), explanation={"why": 1},
        trust=row.trust, domain=row.domain,
    )  # fmt: skip
