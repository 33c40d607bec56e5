"""Cited answers over the knowledge base (LLM, extractive or abstain).

Public API::

    from clawkb.answer import answer, flag_injection
    result = answer(kb, "TJA1051 待机引脚怎么接?")   # -> Answer (.text, .citations, .to_dict())
    flag_injection(passage_text)                     # -> ["instruction-override", ...]
"""

from clawkb.answer.context import Passage
from clawkb.answer.core import Answer, answer
from clawkb.answer.roles import Role, list_roles
from clawkb.llm import ChatClient, ChatReply, LLMError, LLMSettings
from clawkb.retrieve.abstain import NOT_FOUND
from clawkb.text.injection import FLAG_DESCRIPTIONS, flag_injection

__all__ = [
    "FLAG_DESCRIPTIONS",
    "NOT_FOUND",
    "Answer",
    "ChatClient",
    "ChatReply",
    "LLMError",
    "LLMSettings",
    "Passage",
    "Role",
    "answer",
    "flag_injection",
    "list_roles",
]
