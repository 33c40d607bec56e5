"""SRT and WebVTT parser: cues merged into passages that carry their time span.

A single cue ("OK, next slide.") is too small to search well, so consecutive
cues are merged into a passage until it holds about :data:`PASSAGE_CHARS`
characters, or a pause longer than :data:`MAX_GAP_S` seconds starts a new
topic. Each passage is one slice whose heading path is its time span,
``"00:01:02.000 --> 00:01:30.500"``, so every hit shows where to seek in the
recording; the chunker never merges two passages (different heading paths).
The document metadata lists every passage with its start/end in seconds and
its line span, and the total duration.

Cue text keeps speaker names (``<v Alice>`` becomes ``Alice: ``) and drops
styling tags, karaoke timestamps, VTT ``NOTE``/``STYLE``/``REGION`` blocks
and SRT cue numbers. Line numbers are the file lines of the passage's first
timing line through its last text line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePath
from typing import ClassVar

from clawkb.errors import ParseError
from clawkb.parsers.sniff import decode_text_or_reject
from clawkb.types import ParsedDocument, Slice

PASSAGE_CHARS = 400
MAX_GAP_S = 8.0
_TIME = r"(?:(\d+):)?(\d{1,2}):(\d{2})[.,](\d{1,3})"
_TIMING = re.compile(rf"^\s*{_TIME}\s*-->\s*{_TIME}")
_VOICE = re.compile(r"<v(?:\.[^ >]*)?\s+([^>]+)>")
_TAG = re.compile(r"</?[a-zA-Z][^>]*>|<\d[\d:.]*>|\{\\[^}]*\}")
_ENTITIES = {"&amp;": "&", "&lt;": "<", "&gt;": ">", "&nbsp;": " ", "&lrm;": "", "&rlm;": ""}


@dataclass(frozen=True, slots=True)
class Cue:
    start: float
    end: float
    text: str
    line_start: int
    line_end: int


class SubtitleParser:
    """Parser for ``.srt`` and ``.vtt`` files."""

    name: ClassVar[str] = "subtitles"
    extensions: ClassVar[tuple[str, ...]] = (".srt", ".vtt")
    mime_types: ClassVar[tuple[str, ...]] = ("application/x-subrip", "text/vtt")

    def parse(self, data: bytes, path: str) -> ParsedDocument:
        text, encoding = decode_text_or_reject(data, path, "a subtitle file")
        lines = text.split("\n")
        cues = parse_cues(lines, path)
        passages = merge_cues(cues)
        slices = tuple(
            Slice(
                "\n".join(c.text for c in group),
                group[0].line_start,
                group[-1].line_end,
                (f"{format_ts(group[0].start)} --> {format_ts(group[-1].end)}",),
            )
            for group in passages
        )
        metadata = {
            "format": "vtt" if lines and lines[0].lstrip("\ufeff").startswith("WEBVTT") else "srt",
            "cues": len(cues),
            "duration_s": max((c.end for c in cues), default=0.0),
            "passages": [
                {
                    "start": g[0].start,
                    "end": g[-1].end,
                    "start_ts": format_ts(g[0].start),
                    "end_ts": format_ts(g[-1].end),
                    "line_start": g[0].line_start,
                    "line_end": g[-1].line_end,
                }
                for g in passages
            ],
        }
        return ParsedDocument(slices, PurePath(path).stem, metadata, encoding)


def parse_cues(lines: list[str], path: str) -> list[Cue]:
    """Every cue in file order; raises :class:`ParseError` when there is none at all."""
    cues: list[Cue] = []
    i, n = 0, len(lines)
    skipping = False  # inside a NOTE/STYLE/REGION block
    while i < n:
        line = lines[i].strip()
        if not line:
            skipping = False
            i += 1
            continue
        if line.startswith(("NOTE", "STYLE", "REGION")) and not _TIMING.match(line):
            skipping = True
        m = _TIMING.match(line)
        if skipping or m is None:
            i += 1
            continue
        start, end = _seconds(m.groups()[:4]), _seconds(m.groups()[4:])
        j = i + 1
        body = []
        while j < n and lines[j].strip() and not _TIMING.match(lines[j]):
            body.append(lines[j])
            j += 1
        # an SRT cue number directly before the next timing line is not text
        if body and j < n and _TIMING.match(lines[j]) and body[-1].strip().isdigit():
            body.pop()
        text = clean_cue_text(body)
        if text:
            cues.append(Cue(start, max(start, end), text, i + 1, max(i + 1, i + len(body) + 1)))
        i = j
    if not cues and any(line.strip() for line in lines):
        raise ParseError(path, "no subtitle cues found (expected 'HH:MM:SS,mmm --> HH:MM:SS,mmm')")
    return cues


def clean_cue_text(body: list[str]) -> str:
    out = []
    for raw in body:
        line = _VOICE.sub(lambda m: f"{m.group(1).strip()}: ", raw)
        line = _TAG.sub("", line)
        for entity, repl in _ENTITIES.items():
            line = line.replace(entity, repl)
        line = " ".join(line.split())
        if line:
            out.append(line)
    return " ".join(out)


def merge_cues(cues: list[Cue]) -> list[list[Cue]]:
    """Group consecutive cues into passages by size and by pauses."""
    groups: list[list[Cue]] = []
    size = 0
    for cue in cues:
        if groups:
            last = groups[-1][-1]
            if size + len(cue.text) <= PASSAGE_CHARS and cue.start - last.end <= MAX_GAP_S:
                groups[-1].append(cue)
                size += len(cue.text) + 1
                continue
        groups.append([cue])
        size = len(cue.text)
    return groups


def format_ts(seconds: float) -> str:
    """``3723.5`` -> ``"01:02:03.500"``."""
    ms = round(seconds * 1000)
    h, rest = divmod(ms, 3_600_000)
    m, rest = divmod(rest, 60_000)
    s, ms = divmod(rest, 1000)
    return f"{h:02d}:{m:02d}:{s:02d}.{ms:03d}"


def _seconds(parts: tuple[str | None, ...]) -> float:
    h, m, s, frac = parts
    return (
        int(h or 0) * 3600
        + int(m or 0) * 60
        + int(s or 0)
        + int((frac or "0").ljust(3, "0")) / 1000
    )
