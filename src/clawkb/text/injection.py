"""Prompt-injection hygiene: flag suspicious passages and wrap passages as data.

Retrieved text is untrusted: a note, a scraped web page or a datasheet can
carry instructions aimed at the model that reads it. We do two things:

* :func:`flag_injection` names the patterns a passage contains, so search
  results, answers and MCP output can show a warning next to the source;
* :func:`wrap_passage` puts a passage into the prompt inside a labelled
  ``<passage>`` element, with the characters that could close the element or
  hide text neutralised, so the role templates can tell the model that
  everything inside is quoted data, never instructions.

Flagging is a heuristic (precision over recall): it never drops a passage,
it only labels it.
"""

from __future__ import annotations

import re
import unicodedata

from clawkb.memo import bytes_lru, str_bytes

__all__ = ["FLAG_DESCRIPTIONS", "flag_injection", "sanitize", "wrap_passage"]

#: Stable flag codes (part of the JSON and MCP output) and what they mean.
FLAG_DESCRIPTIONS: dict[str, str] = {
    "instruction-override": "asks the reader to ignore/override earlier instructions",
    "prompt-exfiltration": "asks to reveal or print the system prompt",
    "hidden-html": "HTML that hides text from a human reader (display:none, hidden, comments with instructions)",
    "zero-width-text": "zero-width or invisible format characters",
    "bidi-control": "bidirectional override characters that reorder what a human sees",
    "unicode-tags": "Unicode tag characters (invisible ASCII smuggling)",
    "tool-call-lookalike": "text imitating a tool/function call or chat-template markers",
}

_EN_OVERRIDE = re.compile(
    r"\b(?:ignore|disregard|forget|override|bypass)\b[\s,]+(?:all\s+|any\s+|the\s+|your\s+|of\s+)*"
    r"(?:previous|prior|above|earlier|preceding|former|system|original|existing)?\s*"
    r"(?:instructions?|prompts?|rules|directions|guidelines|context|messages?)\b",
    re.IGNORECASE,
)
_EN_ROLE = re.compile(
    r"\b(?:you\s+are\s+now\s+(?:in\s+)?(?:DAN|developer\s+mode|jailbroken|unrestricted)"
    r"|new\s+(?:system\s+)?instructions?\s*:|from\s+now\s+on,?\s+you\s+(?:will|must|are))",
    re.IGNORECASE,
)
_ZH_OVERRIDE = re.compile(
    r"(?:忽略|无视|忽视|忘记|忘掉|不要理会|跳过|覆盖)\s*(?:掉)?\s*"
    r"(?:之前|以前|先前|前面|上面|以上|上述|此前|原来|原有|所有|全部|一切|系统)*\s*(?:的)?\s*"
    r"(?:所有|全部|一切)?\s*(?:的)?\s*(?:指令|指示|提示词?|规则|要求|设定|命令|约束)"
)
_ZH_ROLE = re.compile(
    r"(?:从现在(?:开始|起)，?你(?:是|必须|将)|你现在是一个?(?:没有限制|不受限制))"
)
_EXFIL = re.compile(
    r"\b(?:reveal|print|show|repeat|output|leak|display)\b[^.\n]{0,30}\b(?:system\s+prompt|hidden\s+instructions?|initial\s+instructions?)"
    r"|(?:输出|泄露|显示|打印|告诉我)[^。\n]{0,12}(?:系统提示词?|系统指令|隐藏指令|初始指令)",
    re.IGNORECASE,
)
_HIDDEN_STYLE = re.compile(
    r"<[a-z][^>]*\bstyle\s*=\s*[\"'][^\"']*(?:display\s*:\s*none|visibility\s*:\s*hidden|"
    r"font-size\s*:\s*0(?![.\d]*[1-9])|opacity\s*:\s*0(?![.\d]*[1-9]))",
    re.IGNORECASE,
)
_HIDDEN_ATTR = re.compile(r"<[a-z][^>]*\s(?:hidden|aria-hidden\s*=\s*[\"']true[\"'])[\s>/=]", re.I)
_COMMENT = re.compile(r"<!--(.*?)-->", re.DOTALL)
_COMMENT_WORDS = re.compile(
    r"\b(?:instructions?|assistant|AI|LLM|model|prompt|ignore|must|system)\b|指令|助手|模型|提示词|忽略",
    re.IGNORECASE,
)
_ZERO_WIDTH = re.compile("[\u200b\u200c\u200d\u2060\u2061\u2062\u2063\u2064\u180e\ufeff]")
_BIDI = re.compile("[\u202a-\u202e\u2066-\u2069]")
_TAGS = re.compile("[\U000e0000-\U000e007f]")
_TOOL = re.compile(
    r"</?(?:tool_call|tool_use|function_calls?|invoke|antml:[a-z_]+|tool_result)\b"
    r"|<\|(?:im_start|im_end|system|user|assistant|endoftext|eot_id|start_header_id)\|>"
    r"|\[/?INST\]|<</?SYS>>"
    r"|\"(?:tool_calls|function_call)\"\s*:"
    r"|^\s*(?:###\s*)?(?:system|assistant)\s*:\s*\S",
    re.IGNORECASE | re.MULTILINE,
)


def flag_injection(text: str) -> list[str]:
    """Return the prompt-injection flag codes found in ``text`` (empty: clean).

    Codes come from :data:`FLAG_DESCRIPTIONS`, in that order, each at most
    once. Why: agents and the ``ask`` prompt show these next to a passage so
    a human (or a careful agent) can discount text written to steer a model.
    The check is pure (a few regex scans, kept per text: the same passages are
    flagged search after search), safe to run on every hit.
    """
    return list(_flags(text))


@bytes_lru(4 << 20, lambda args, flags: 120 + str_bytes(args[0]) + 60 * len(flags))
def _flags(text: str) -> tuple[str, ...]:
    found: set[str] = set()
    folded = unicodedata.normalize("NFKC", _ZERO_WIDTH.sub("", text))
    if _EN_OVERRIDE.search(folded) or _ZH_OVERRIDE.search(folded):
        found.add("instruction-override")
    if _EN_ROLE.search(folded) or _ZH_ROLE.search(folded):
        found.add("instruction-override")
    if _EXFIL.search(folded):
        found.add("prompt-exfiltration")
    if (
        _HIDDEN_STYLE.search(text)
        or _HIDDEN_ATTR.search(text)
        or any(_COMMENT_WORDS.search(m.group(1)) for m in _COMMENT.finditer(text))
    ):
        found.add("hidden-html")
    if _ZERO_WIDTH.search(text.lstrip("\ufeff")):
        found.add("zero-width-text")
    if _BIDI.search(text):
        found.add("bidi-control")
    if _TAGS.search(text):
        found.add("unicode-tags")
    if _TOOL.search(folded):
        found.add("tool-call-lookalike")
    return tuple(code for code in FLAG_DESCRIPTIONS if code in found)


def sanitize(text: str) -> str:
    """Drop invisible characters (zero-width, bidi, tags) before text reaches a model."""
    return _TAGS.sub("", _BIDI.sub("", _ZERO_WIDTH.sub("", text)))


def wrap_passage(n: int, source: str, section: str, text: str, flags: list[str]) -> str:
    """Render one passage as a labelled data element for a prompt.

    The passage cannot close its own element: ``<passage``/``</passage``
    inside the text are defanged, so injected markup stays inside the data.
    """
    body = re.sub(r"<(/?)passage", r"‹\1passage", sanitize(text), flags=re.IGNORECASE)
    attrs = f'n="{n}" source="{_attr(source)}"'
    if section:
        attrs += f' section="{_attr(section)}"'
    if flags:
        attrs += f' warning="possible prompt injection: {", ".join(flags)}"'
    return f"<passage {attrs}>\n{body.strip()}\n</passage>"


def _attr(value: str) -> str:
    return (
        value.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;").replace(">", "&gt;")
    )
