"""E-mail: ``.eml`` (one message) and mbox archives (``.mbox``, a file named ``mbox``).

Standard library only (:mod:`email` with the modern policy). Per message:

* the subject is the heading (``(thread subject, message subject)``): messages
  are grouped into threads by ``References``/``In-Reply-To`` (the thread's
  first message names it); the document title is the first subject;
* ``From``, ``Date``, ``Message-ID`` and the thread go to the document
  metadata (``messages``, at most :data:`MAX_MESSAGES_META`), and a one-line
  ``From: … · Date: …`` text slice heads each message so they are searchable;
* the body is the ``text/plain`` part (else the HTML part, tags removed), in
  blank-line paragraphs; quoted lines (``> …``) and the ``On … wrote:`` line
  above them are left out when the quoted message is in the same archive
  (it is indexed there already), kept otherwise;
* attachments go through the parser of their file name (bounded: at most
  :data:`MAX_ATTACHMENTS` per message, :data:`MAX_ATTACHMENT_BYTES` each), their
  slices under ``(…, "attachment: name")``.

Line spans: a message's lines in the file; body paragraphs get exact lines
when the body is a single, unencoded text part, else the message's span.
"""

from __future__ import annotations

import email
import email.policy
import re
from dataclasses import dataclass, field
from email.message import EmailMessage, MIMEPart
from pathlib import PurePath
from typing import ClassVar, TypedDict

from clawkb.errors import ClawkbError, ParseError
from clawkb.parsers.safety import guard
from clawkb.parsers.text import paragraph_slices
from clawkb.text.decode import decode_text, looks_binary
from clawkb.types import ParsedDocument, Slice

MAX_MESSAGES = 50_000
MAX_MESSAGES_META = 500
MAX_ATTACHMENTS = 20
MAX_ATTACHMENT_BYTES = 8 << 20
_FROM_LINE = re.compile(rb"^From \S*.*$")
_ATTRIBUTION = re.compile(r"^(?:On .{0,200}wrote:|.{0,120}\bwrote:|.{0,80}写道[:：]?)\s*$")
_TAG = re.compile(r"<[^>]+>")
_MSGID = re.compile(r"<[^<>\s]+>")


#: One message as listed in the document's metadata (functional form: ``from`` is a keyword).
_MessageMeta = TypedDict(
    "_MessageMeta",
    {"subject": str, "from": str, "date": str, "message_id": str, "thread": str, "line": int},
)


@dataclass(slots=True)
class _Msg:
    first: int  # 1-based line of the message (its "From " line in an mbox)
    last: int
    body_line: int  # 1-based line where the body starts
    raw: bytes
    msg: EmailMessage
    msgid: str = ""
    parents: list[str] = field(default_factory=list)


class MailParser:
    """Parser for e-mail messages and mbox archives."""

    name: ClassVar[str] = "mail"
    extensions: ClassVar[tuple[str, ...]] = (".eml", ".mbox", ".mbx")
    filenames: ClassVar[tuple[str, ...]] = ("mbox",)
    mime_types: ClassVar[tuple[str, ...]] = ("message/rfc822", "application/mbox")
    #: Untrusted MIME and attachments: parsed in the sandboxed worker.
    isolate: ClassVar[bool] = True

    def preload(self) -> None:
        """Load the registry (attachment parsers) once in the parent, before the fork."""
        from clawkb.parsers.registry import default_registry

        default_registry()

    def parse(self, data: bytes, path: str) -> ParsedDocument:
        if looks_binary(data[:8192]):
            raise ParseError(path, "binary content, not an e-mail message")
        with guard(path, "e-mail"):
            messages = list(_split(data, path))
            if not messages:
                raise ParseError(path, "no e-mail message found")
            return _Builder(messages, path).build()


def _split(data: bytes, path: str) -> list[_Msg]:
    """An mbox's messages (split on ``From `` lines), or the one message of an ``.eml``."""
    lines = data.split(b"\n")
    starts = [0] if not _FROM_LINE.match(lines[0]) else []
    for i, line in enumerate(lines):
        if _FROM_LINE.match(line) and (i == 0 or not lines[i - 1].strip()):
            starts.append(i)
    if len(starts) > MAX_MESSAGES:
        raise ParseError(path, f"{len(starts)} messages (limit {MAX_MESSAGES})")
    out: list[_Msg] = []
    for k, start in enumerate(starts):
        end = starts[k + 1] if k + 1 < len(starts) else len(lines)
        head = start + 1 if _FROM_LINE.match(lines[start]) else start
        chunk = lines[head:end]
        while chunk and not chunk[-1].strip():
            chunk.pop()
            end -= 1
        if not chunk:
            continue
        # mboxrd: ">From " in a body was escaped once
        raw = b"\n".join(re.sub(rb"^>(>*From )", rb"\1", ln) for ln in chunk)
        blank = next((i for i, ln in enumerate(chunk) if not ln.strip(b"\r")), len(chunk))
        msg = email.message_from_bytes(raw, policy=email.policy.default)
        if not isinstance(msg, EmailMessage) or not (msg.keys()):
            continue
        out.append(_Msg(start + 1, max(end, start + 1), head + blank + 2, raw, msg))
    return out


class _Builder:
    def __init__(self, messages: list[_Msg], path: str) -> None:
        self.messages = messages
        self.path = path
        self.slices: list[Slice] = []
        self.warnings: list[str] = []
        for m in messages:
            m.msgid = _first_id(str(m.msg.get("Message-ID", "") or ""))
            refs = _MSGID.findall(str(m.msg.get("References", "") or ""))
            reply = _first_id(str(m.msg.get("In-Reply-To", "") or ""))
            m.parents = [*refs, reply] if reply else refs
        self.known = {m.msgid for m in messages if m.msgid}

    def build(self) -> ParsedDocument:
        roots: dict[str, str] = {}  # message id -> thread subject
        meta: list[_MessageMeta] = []
        for m in self.messages:
            subject = _header(m.msg, "Subject") or "(no subject)"
            root = next((roots[p] for p in m.parents if p in roots), None)
            thread = root or _strip_re(subject)
            if m.msgid:
                roots[m.msgid] = thread
            quoted_here = any(p in self.known for p in m.parents)
            self._message(m, thread, subject, quoted_here)
            if len(meta) < MAX_MESSAGES_META:
                meta.append(
                    {
                        "subject": subject,
                        "from": _header(m.msg, "From"),
                        "date": _header(m.msg, "Date"),
                        "message_id": m.msgid,
                        "thread": thread,
                        "line": m.first,
                    }
                )
        title = meta[0]["subject"] if meta else PurePath(self.path).stem
        first = meta[0] if len(self.messages) == 1 else None
        metadata: dict[str, object] = {"messages": meta, "message_count": len(self.messages)}
        if first is not None:
            metadata.update({"from": first["from"], "date": first["date"]})
        return ParsedDocument(tuple(self.slices), title, metadata, "utf-8", tuple(self.warnings))

    def _message(self, m: _Msg, thread: str, subject: str, drop_quotes: bool) -> None:
        path = (thread, subject) if thread != subject else (subject,)
        who = " · ".join(f"{k}: {v}" for k in ("From", "To", "Date") if (v := _header(m.msg, k)))
        self.slices.append(Slice(f"{subject}\n{who}", m.first, m.first, path))
        body_part = m.msg.get_body(preferencelist=("plain", "html"))
        if body_part is not None:
            self._body(m, body_part, path, drop_quotes)
        for n, part in enumerate(m.msg.iter_attachments()):
            if n >= MAX_ATTACHMENTS:
                self.warnings.append(f"line {m.first}: attachments past {MAX_ATTACHMENTS} skipped")
                break
            self._attachment(m, part, path)

    def _body(self, m: _Msg, part: MIMEPart, path: tuple[str, ...], drop_quotes: bool) -> None:
        try:
            content = part.get_content()
        except (LookupError, ValueError, AssertionError):
            payload = _decoded_payload(part)
            content, _ = decode_text(payload, self.path) if payload else ("", "")
        if not isinstance(content, str):
            return
        if part.get_content_subtype() == "html":
            content = _TAG.sub(" ", content)
        lines = content.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        exact = (
            not m.msg.is_multipart()
            and str(m.msg.get("Content-Transfer-Encoding", "7bit")).lower() in ("7bit", "8bit")
            and part.get_content_subtype() == "plain"
        )
        if drop_quotes:
            lines = _drop_quotes(lines)
        for sl in paragraph_slices(lines, m.body_line if exact else 1):
            if exact:
                first, last = sl.line_start, min(sl.line_end, m.last)
            else:
                first, last = m.first, m.last
            self.slices.append(Slice(sl.text, min(first, last), last, path))

    def _attachment(self, m: _Msg, part: MIMEPart, path: tuple[str, ...]) -> None:
        from clawkb.parsers.compressed import parse_inner
        from clawkb.parsers.registry import default_registry

        name = part.get_filename() or ""
        parser = default_registry().for_path(name) if name else None
        if parser is None or parser.name == "mail":
            return
        payload = _decoded_payload(part)
        if not payload:
            return
        if len(payload) > MAX_ATTACHMENT_BYTES:
            self.warnings.append(f"line {m.first}: attachment {name} too large, skipped")
            return
        try:
            doc = parse_inner(parser, payload, self.path)
        except ClawkbError as exc:
            self.warnings.append(f"attachment {name}: {exc}")
            return
        label = f"attachment: {name}"
        for sl in doc.slices:
            self.slices.append(
                Slice(sl.text, m.first, m.last, (*path, label, *sl.heading_path), sl.kind,
                      sl.language, links=sl.links)
            )  # fmt: skip


def _decoded_payload(part: MIMEPart) -> bytes:
    """A leaf part's body with its transfer encoding undone (``b""`` for a multipart)."""
    payload = part.get_payload(decode=True)
    return payload if isinstance(payload, bytes) else b""


def _drop_quotes(lines: list[str]) -> list[str]:
    """Blank out ``>`` lines and the attribution line right above them (keeps line count)."""
    out = list(lines)
    for i, line in enumerate(lines):
        if line.lstrip().startswith(">"):
            out[i] = ""
            j = i - 1
            while j >= 0 and not lines[j].strip():
                j -= 1
            if j >= 0 and _ATTRIBUTION.match(lines[j].strip()):
                out[j] = ""
    return out


def _header(msg: EmailMessage, name: str) -> str:
    try:
        value = msg.get(name)
    except (ValueError, IndexError, TypeError):  # a malformed header
        value = msg.get_all(name, failobj=[""])[0] if hasattr(msg, "get_all") else ""
    return " ".join(str(value or "").split())[:300]


def _first_id(text: str) -> str:
    m = _MSGID.search(text)
    return m.group(0) if m else ""


def _strip_re(subject: str) -> str:
    return re.sub(r"^(?:\s*(?:re|fwd?|aw|回复|答复|转发)\s*[:：]\s*)+", "", subject, flags=re.I)
