"""Per-passage memos are bounded by bytes (issue 20: a server's RSS flat after warm-up).

A long-running server keeps meeting new passages (files rewritten and indexed
again); memos bounded by entry count grew with the passages' length until the
N-th one. These check the bound on the real memos with real passages.
"""

from __future__ import annotations

import random

import pytest

from clawkb.memo import MAX_AGE, BytesLRU, bytes_lru, new_generation
from clawkb.retrieve import abstain, hits
from clawkb.retrieve.snippet import Prepared
from clawkb.text import injection


def test_least_recently_used_entries_go_first_and_the_bytes_stay_under_the_budget() -> None:
    calls: list[int] = []

    @bytes_lru(100, lambda args, result: 30)
    def double(x: int) -> int:
        calls.append(x)
        return 2 * x

    assert [double(i) for i in (1, 2, 3)] == [2, 4, 6]
    assert double(1) == 2 and calls == [1, 2, 3]  # a hit; 1 is now the most recent
    double(4)  # over 100 bytes: the least recently used (2) goes
    assert len(double) == 3 and double.nbytes == 90
    double(2)
    assert calls == [1, 2, 3, 4, 2]
    double(1)
    assert calls[-1] == 2  # 1 was still kept


def test_entries_unused_for_max_age_write_generations_are_dropped() -> None:
    """A server that rewrites files retires passages every write: an entry not used
    for :data:`~clawkb.memo.MAX_AGE` generations goes at the next insertion, far under the
    budget; one used meanwhile stays; without writes nothing ages."""
    calls: list[int] = []

    @bytes_lru(1 << 20, lambda args, result: 30)
    def double(x: int) -> int:
        calls.append(x)
        return 2 * x

    double(1), double(2)
    for _ in range(MAX_AGE):
        new_generation()
    double(1)  # used: young again
    new_generation()
    double(3)  # an insertion: 2 is older than MAX_AGE now
    assert len(double) == 2 and double.nbytes == 60
    double(2)
    assert calls == [1, 2, 3, 2]
    for k in range(100):  # no write: nothing ages, whatever the traffic
        double(10 + k)
    assert len(double) == 103


def test_an_entry_larger_than_the_budget_is_computed_but_not_kept() -> None:
    big = BytesLRU(lambda s: s.upper(), 50, lambda args, result: len(args[0]))
    assert big("x" * 80) == "X" * 80
    assert len(big) == 0 and big.nbytes == 0


def _same(a: object, b: object) -> bool:
    if isinstance(a, Prepared) and isinstance(b, Prepared):
        return (a.flat, a.norm, a.back) == (b.flat, b.norm, b.back)
    return a == b


def _passages(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(2000)] + ["阻抗", "走线", "时钟", "复位"]
    return [" ".join(rng.choices(words, k=400)) + f" rev{i}" for i in range(n)]


@pytest.mark.parametrize(
    ("memo", "call"),
    [
        (hits._view, lambda t, i: hits._view(f"anchor{i}", t)),
        (injection._flags, lambda t, i: injection._flags(t)),
        (abstain._passage_words, lambda t, i: abstain._passage_words(t)),
    ],
)
def test_passage_memos_stop_growing_at_their_byte_budget(memo, call) -> None:  # type: ignore[no-untyped-def]
    memo.cache_clear()
    budget = memo.max_bytes
    try:
        memo.max_bytes = 256 << 10  # the same code, a small budget: quick to fill
        texts = _passages(400, seed=3)
        for i, text in enumerate(texts):
            call(text, i)
            assert memo.nbytes <= memo.max_bytes
        assert 0 < len(memo) < len(texts)
        # each entry's estimate covers at least its passage's text (held by the key)
        assert memo.nbytes >= len(memo) * min(len(t) for t in texts)
        # results are those of the function, cached or not
        again = call(texts[-1], len(texts) - 1)
        memo.cache_clear()
        fresh = call(texts[-1], len(texts) - 1)
        assert _same(fresh, again)
    finally:
        memo.max_bytes = budget
        memo.cache_clear()


def test_passage_words_keep_only_stems_that_differ_yet_answer_as_the_full_set() -> None:
    """The not-found memo keeps a stem only when it differs from its token; asking
    whether a passage holds a stem answers as the set of every token's stem did."""
    text = (
        "Configuring timers: the timer configures clock dividers; clocks and dividing "
        "stages, GPIO12 soakword00012z 阻抗 走线 configuration configured reset resets"
    )
    abstain._passage_words.cache_clear()
    words = abstain._passage_words(text)
    have, kept = words
    full = {abstain._stem(t) for t in have}
    assert kept < full  # the tokens that are their own stem are not kept again
    probes = full | have | {"config", "timer", "clock", "divid", "absent", "gpio12"}
    for probe in probes:
        assert abstain._has_stem(words, probe) == (probe in full), probe
