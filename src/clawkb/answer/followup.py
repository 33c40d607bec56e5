"""Follow-up questions in a conversation, rewritten into standalone queries.

Retrieval sees one query at a time, so "what is its baud rate?" after "which
UART is the debug console?" must carry the earlier turn's subject. No model is
needed for the common shapes:

* **pronoun / demonstrative** follow-ups (``it``, ``its``, ``this``, ``they``,
  ``它``, ``这个``, ``该`` …) and very short questions get the previous turn's
  key terms appended (the words of its standalone query that are not
  stop words and not already asked);
* **elliptic** follow-ups (``what about UART3?``, ``and UART3?``, ``UART3 呢？``,
  ``那 UART3 呢``) take the previous standalone query and swap in the new
  subject where a term of the same shape stood (``UART2`` → ``UART3``), or
  else append the previous key terms to the new subject.

A question that names its own subject is left as it is.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_.\-]*[A-Za-z0-9]|[A-Za-z]|[0-9][\w.\-]*|[\u4e00-\u9fff]+")
_PRONOUNS_EN = {
    "it", "its", "it's", "this", "that", "these", "those", "they", "them", "their",
    "there", "he", "she", "his", "her", "one", "ones", "same",
}  # fmt: skip
_PRONOUNS_ZH = (
    "它",
    "它们",
    "这个",
    "那个",
    "这些",
    "那些",
    "该",
    "其",
    "此",
    "上述",
    "这里",
    "那里",
)
_STOP_EN = {
    "a", "an", "the", "is", "are", "was", "were", "be", "been", "do", "does", "did", "what",
    "which", "who", "whom", "whose", "where", "when", "why", "how", "of", "on", "in", "at",
    "to", "for", "from", "by", "with", "and", "or", "not", "no", "can", "could", "should",
    "would", "will", "shall", "may", "might", "must", "i", "we", "you", "me", "my", "our",
    "your", "about", "also", "use", "used", "uses", "using", "there", "any", "some", "much",
    "many", "than", "then", "so", "if", "as", "into", "up", "out", "tell", "please", "need",
    "get", "set", "have", "has", "had", "else", "more", "other",
    *_PRONOUNS_EN,
}  # fmt: skip
_STOP_ZH = re.compile(
    r"是什么|什么|多少|怎么|如何|哪个|哪些|为什么|吗|呢|吧|的|了|是|在|和|与|及|还有|那么|那|也|请问|请|一下"
)
_ELLIPTIC_EN = re.compile(
    r"^\s*(?:and|what about|how about|also|and what about|same for)\s+(.+?)\s*\??\s*$", re.I
)
_ELLIPTIC_ZH = re.compile(r"^\s*(?:那|那么|还有|再)?\s*(.+?)\s*呢\s*[?？]?\s*$")


def key_terms(text: str) -> list[str]:
    """The content words of ``text`` in order: identifiers, English words that are not stop
    words, and Chinese runs with question words cut out."""
    out: list[str] = []
    for word in _WORD.findall(text):
        if "\u4e00" <= word[0] <= "\u9fff":
            parts = [p for p in _STOP_ZH.split(word) if p]
            for pronoun in _PRONOUNS_ZH:
                parts = [q for p in parts for q in p.split(pronoun) if q]
            out += [p for p in parts if len(p) >= 2]
        elif (len(word) > 1 and word.isupper()) or (word.lower() not in _STOP_EN and len(word) > 1):
            out.append(word)  # an acronym (CAN, IT) is a term even when its lower case is not
    seen: set[str] = set()
    return [w for w in out if not (w.lower() in seen or seen.add(w.lower()))]  # type: ignore[func-returns-value]


def is_follow_up(question: str) -> bool:
    """True when the question leans on an earlier turn (a pronoun, an ellipsis, or too
    few words of its own to search with)."""
    if _ELLIPTIC_EN.match(question) or _ELLIPTIC_ZH.match(question):
        return True
    words = {w.lower() for w in _WORD.findall(question)}
    if words & _PRONOUNS_EN or any(p in question for p in _PRONOUNS_ZH):
        return True
    return len(key_terms(question)) <= 1


def _shape(term: str) -> str:
    """``UART2`` → ``uart#``: letters kept, digits folded, for "same kind of thing"."""
    return re.sub(r"[0-9]+", "#", term.lower())


def standalone(question: str, history: Sequence[str]) -> str:
    """``question`` as a query that stands on its own, given the earlier standalone queries
    (oldest first)."""
    question = question.strip()
    if not history or not is_follow_up(question):
        return question
    previous = history[-1]
    m = _ELLIPTIC_EN.match(question) or _ELLIPTIC_ZH.match(question)
    if m:
        subject = m.group(1).strip()
        new_terms = key_terms(subject)
        if len(new_terms) == 1:
            new = new_terms[0]
            for old in key_terms(previous):
                if old.lower() != new.lower() and _shape(old) == _shape(new):
                    return re.sub(re.escape(old), new, previous, count=1)
        extra = [t for t in key_terms(previous) if t.lower() not in subject.lower()]
        return " ".join([subject, *extra]).strip()
    extra = [t for t in key_terms(previous) if t.lower() not in question.lower()]
    return " ".join([question, *extra]).strip()
