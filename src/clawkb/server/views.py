"""What the reader views of one server process share: the lexical index of a generation.

Each reader thread keeps its own view (:class:`clawkb.server.runtime._Slot`:
its own connection and read snapshot), renewed after every write. Each view
used to open the index again: read and check the manifest, take a lease, map
the segments' live masks, and then fill its own per-generation memos (the
collection statistics, the length factors, the kernel's per-segment
arguments and block bounds) on its first searches: a write cost every
process once per reader thread. :class:`LexicalShare` opens a published
generation once per process and lends it to every view that renews while it
is the current one; a view keeps the one it was lent until its next renewal,
so a view pinned to an older snapshot never sees a newer generation. A
generation goes (its lease released, its maps dropped) when no view holds it
and a newer one was opened.

An index opened damaged is lent to the view that opened it alone (its repair
path replaces it); an unclean writer's exit (its pid left in the lock file)
makes the next open a full check, as a KB's own open would.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clawkb.index.lexical import LexicalIndex

if TYPE_CHECKING:
    from clawkb.kb import KnowledgeBase


class SharedLexicalIndex(LexicalIndex):
    """A reader's index lent by a :class:`LexicalShare`: :meth:`close` gives it back."""

    share: LexicalShare | None = None
    key: tuple[Any, ...] = ()
    refs = 0

    def close(self) -> None:
        share = self.share
        if share is None:
            super().close()
        else:
            share.release(self)

    def close_now(self) -> None:
        """Release the lease and the maps (no view holds it any more)."""
        self.share = None
        super().close()


class LexicalShare:
    """The current lexical generation per KB index folder and ranking parameters, opened
    once per process and lent to the views (see the module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        #: serialises opens: views renewing together after a write open it once
        self._open_lock = threading.Lock()
        self._current: dict[tuple[Any, ...], SharedLexicalIndex] = {}
        #: how many generations this process opened (tests, benchmarks)
        self.opened = 0

    def __call__(self, kb: KnowledgeBase) -> LexicalIndex:
        """``kb``'s index (the ``lexical`` argument of :class:`KnowledgeBase`)."""
        params = kb.lexical_params()
        key = (
            str(Path(kb.home) / "index" / "lexical"),
            params.k1,
            tuple(params.weights),
            tuple(params.b),
            kb.store_id,
        )
        with self._open_lock:
            full_check = kb._unclean_writer()
            with self._lock:
                found = self._current.get(key)
                if found is not None and not full_check and not found.is_stale():
                    found.refs += 1
                    return found
            lex = kb.open_lexical(SharedLexicalIndex, full_check=full_check)
            self.opened += 1
            lex.share, lex.key, lex.refs = self, key, 1
            if lex.damaged:  # not lent to others: its view's repair path replaces it
                lex.share = None
                return lex
            with self._lock:
                old = self._current.get(key)
                self._current[key] = lex
                if old is None or old.refs > 0:
                    old = None
            if old is not None:
                old.close_now()
            return lex

    def release(self, lex: SharedLexicalIndex) -> None:
        """A view let go of ``lex``: closed when no view holds it and it is not current."""
        with self._lock:
            lex.refs = max(0, lex.refs - 1)
            if lex.refs or self._current.get(lex.key) is lex:
                return
        lex.close_now()

    def close(self) -> None:
        """The server stops: every current generation is closed."""
        with self._lock:
            current, self._current = list(self._current.values()), {}
        for lex in current:
            lex.close_now()
