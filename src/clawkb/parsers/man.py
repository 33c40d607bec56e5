"""Man pages (``*.1``…``*.9``, ``*.man``; ``ls.1.gz`` through the compressed parser).

A small reader for the man(7) macros real pages use (``.TH .SH .SS .TP .TQ
.IP .HP .PP .LP .P .B .I .BR .IR .RB… .nf/.fi .EX/.EE .UR/.UE .SY/.OP``,
pod2man's ``.IX`` and strings) and the common mdoc(7) ones (``.Dt .Sh .Ss .It
.Fl .Ar .Nm .Nd .Op .Bl/.El .Bd/.Ed``), written here rather than calling
``groff``/``mandoc``: their rendered output has lost the source lines, and
every slice here keeps exact ones. Requests the reader does not know are
dropped (never executed); ``.so`` (include another page) is not followed —
nothing outside the file is read.

Structure: ``.SH`` sections (NAME, SYNOPSIS, DESCRIPTION, OPTIONS…) and
``.SS`` subsections make the heading path; each tagged paragraph (``.TP`` or
``.IP tag``, mdoc ``.It``) is one ``list`` slice ``tag: description`` — one
per option; ``.nf``/``.EX`` blocks are code; other text is paragraphs. The
title is the NAME line (``ls - list directory contents``), else ``name(section)``
from ``.TH``.
"""

from __future__ import annotations

import re
from pathlib import PurePath
from typing import ClassVar

from clawkb.text.decode import decode_source
from clawkb.types import Link, ParsedDocument, Slice

_SECTIONS = tuple(f".{n}" for n in "123456789")
#: Common section suffixes with a letter (``perl``'s ``.3pm``, OpenSSL's ``.3ssl``).
_SUFFIXED = (".1p", ".3p", ".3pm", ".3perl", ".1ssl", ".3ssl", ".5ssl", ".7ssl", ".3x", ".8p")
_NAMED_CHARS = {
    "em": "—", "en": "–", "bu": "•", "aq": "'", "dq": '"', "lq": "“", "rq": "”",
    "oq": "'", "cq": "'", "hy": "-", "mi": "-", "pl": "+", "co": "©", "rg": "®",
    "tm": "™", "de": "°", "+-": "±", "mu": "×", "di": "÷", "<=": "≤", ">=": "≥",
    "!=": "≠", "->": "→", "<-": "←", "ga": "`", "ti": "~", "ha": "^", "rs": "\\",
    "sl": "/", "ba": "|", "or": "|", "at": "@", "sh": "#", "Do": "$", "ct": "¢",
    "ua": "↑", "da": "↓", "fm": "′", "sd": "″", "sq": "□", "lh": "☜", "rh": "☞",
}  # fmt: skip
_POD_STRINGS = {"C`": '"', "C'": '"', 'L"': '"', 'R"': '"', "Aq": "'", "Tm": "™", "--": "-"}
_ESCAPE = re.compile(
    r"\\(?:"
    r"f(?:\[[^\]]*\]|\(..|.)"  # font
    r"|s[-+]?(?:\d|\(\d\d|\[\d+\])"  # size
    r"|\*(?:\[(?P<sb>[^\]]*)\]|\((?P<sp>..)|(?P<s1>.))"  # string
    r"|\((?P<c2>..)"  # special character
    r"|\[(?P<cb>[^\]]*)\]"
    r"|[NhvwxkoZbDlLRSHXYu]'[^']*'"
    r"|n(?:\[[^\]]*\]|\(..|.)"  # number register
    r"|g(?:\[[^\]]*\]|\(..|.)"
    r"|\$\d"
    r"|(?P<one>.)"
    r")"
)
#: mdoc inline macros that only style the word after them.
_MDOC_INLINE = re.compile(
    r"\b(?:Nm|Ar|Pa|Cm|Ic|Ev|Va|Em|Sy|Li|Xr|Dv|Er|Fn|Fa|Ft|Ql|Sq|Dq|Pq|Aq|Brq|Bq|Qq|Ns|"
    r"Ux|Bx|At|Ox|Fx|Nx|Lk|Mt|Tn|Sx|Ad|An|Cd|Lb|Ms|No|Ot|St|Vt|Oo|Oc|Ao|Ac|Bo|Bc|Do|Dc|Po|Pc|"
    r"Qo|Qc|So|Sc|Xo|Xc|Eo|Ec|Fo|Fc|Dl|Pf|Li|Op|Oc)\b\s*"
)
_MDOC_FLAG = re.compile(r"\bFl\s+(\S+)")
_URL = re.compile(r"https?://[^\s>)\]]+")
_NO_FILL = (".nf", ".EX", ".Bd", ".Vb")
_FILL = (".fi", ".EE", ".Ed", ".Ve")
_PARAGRAPH = (".PP", ".LP", ".P", ".sp", ".Pp", ".Lp", ".HP", ".br", ".RE", ".El")
_ITEM = (".TP", ".IP", ".It", ".TQ")
_IGNORED_REQUESTS = frozenset(
    [
        ".IX",
        ".ds",
        ".nr",
        ".tr",
        ".ft",
        ".ne",
        ".na",
        ".hy",
        ".nh",
        ".ad",
        ".in",
        ".ti",
        ".ll",
        ".ta",
        ".PD",
        ".UN",
        ".so",
        ".if",
        ".ie",
        ".el",
        ".de",
        ".ig",
        ".rm",
        ".rn",
        ".am",
        ".als",
        ".cc",
        ".c2",
        ".ec",
        ".eo",
        ".lf",
        ".mso",
        ".pso",
        ".do",
        ".ev",
        ".fam",
        ".ss",
        ".cs",
        ".bp",
        ".pl",
        ".po",
        ".ns",
        ".rs",
        ".vs",
        ".ls",
        ".hw",
        ".nx",
        ".rd",
        ".ch",
        ".wh",
        ".it",
        ".mk",
        ".rt",
        ".sv",
        ".os",
        ".fl",
        ".ab",
        ".tm",
        ".pm",
        ".sy",
        ".pi",
        ".cf",
        ".Bl",
        ".Os",
        ".Dd",
        ".An",
        ".Ox",
        ".Ns",
        ".Bk",
        ".Ek",
        ".Sm",
        ".Xo",
        ".Xc",
        ".Ud",
        ".Rs",
        ".Re",
        ".%A",
        ".%T",
        ".%N",
        ".%D",
        ".%O",
        ".%B",
        ".%J",
        ".%P",
        ".%V",
        ".%I",
        ".%Q",
        ".%C",
        ".%U",
        ".Lb",
        ".In",
        ".Cd",
        ".Vt",
        ".Ft",
        ".\\}",
        ".\\{",
        ".DT",
        ".AT",
        ".UC",
        ".OP",
    ]
)


class ManParser:
    """Parser for man pages (man and mdoc macros)."""

    name: ClassVar[str] = "man"
    extensions: ClassVar[tuple[str, ...]] = (*_SECTIONS, *_SUFFIXED, ".man", ".mdoc")
    mime_types: ClassVar[tuple[str, ...]] = ("text/troff", "application/x-troff-man")

    def parse(self, data: bytes, path: str) -> ParsedDocument:
        text, encoding = decode_source(data, path)
        return parse_man(text, path, encoding)


def parse_man(text: str, path: str, encoding: str | None = None) -> ParsedDocument:
    reader = _Reader(text.split("\n"))
    reader.read()
    name = PurePath(path).name
    for suffix in (".gz", ".bz2", ".xz"):
        name = name.removesuffix(suffix)
    title = reader.name_line or reader.th_title or PurePath(name).stem
    metadata: dict[str, object] = {}
    if reader.th:
        metadata["man"] = reader.th
    warnings = tuple(reader.warnings)
    return ParsedDocument(tuple(reader.slices), title, metadata, encoding, warnings)


class _Reader:
    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        self.slices: list[Slice] = []
        self.section: str | None = None
        self.subsection: str | None = None
        self.th: dict[str, str] = {}
        self.th_title = ""
        self.name_line = ""
        self.warnings: list[str] = []
        # the block being gathered
        self.buf: list[str] = []
        self.first = 0
        self.last = 0
        self.kind = "text"
        self.tag: str | None = None
        self.want_tag = False
        self.no_fill = False

    @property
    def path(self) -> tuple[str, ...]:
        return tuple(p for p in (self.section, self.subsection) if p)

    def read(self) -> None:
        skip_until: str | None = None
        for number, raw in enumerate(self.lines, 1):
            line = raw.rstrip()
            if skip_until is not None:
                if line.startswith(skip_until):
                    skip_until = None
                continue
            if line.startswith(('.\\"', "'\\\"", '.\\"')) or line in (".", "'"):
                continue
            if line.lstrip().startswith(("\\{", "\\}")):
                continue  # the body markers of a conditional
            if line.startswith((".", "'")) and len(line) > 1:
                request, args = _split_request(line)
                if request in (".de", ".de1", ".ig", ".am"):
                    skip_until = ".."
                    continue
                self._request(request, args, number)
                continue
            self._text(
                _inline(line) if not self.no_fill else _inline(line, keep_space=True), number
            )
        self._flush()

    # requests -----------------------------------------------------------------------

    def _request(self, request: str, args: list[str], number: int) -> None:
        if request in (".TH", ".Dt"):
            self._th(args)
        elif request in (".SH", ".Sh"):
            self._flush()
            self.section = " ".join(_inline(a) for a in args).strip() or None
            self.subsection = None
            self._heading_slice(self.section, number)
        elif request in (".SS", ".Ss"):
            self._flush()
            self.subsection = " ".join(_inline(a) for a in args).strip() or None
            self._heading_slice(self.subsection, number)
        elif request in _NO_FILL:
            self._flush()
            self.no_fill = True
            self.kind = "code"
        elif request in _FILL:
            self._flush()
            self.no_fill = False
        elif request in (".TP", ".TQ"):
            if request == ".TP":
                self._flush()
            self.want_tag = True
            self.kind = "list"
        elif request == ".IP":
            self._flush()
            tag = _inline(args[0]) if args else ""
            if tag and tag not in ("\\(bu", "•", "-", "*", "o"):
                self.tag, self.kind = tag, "list"
                self.first = number
        elif request == ".It":
            self._flush()
            tag = _mdoc(" ".join(args))
            if tag:
                self.tag, self.kind = tag, "list"
                self.first = number
        elif request == ".RS":
            # DocBook's pages write an option as a one-line paragraph, then the
            # description indented by .RS/.RE: the same item as a .TP
            one_line = len(self.buf) == 1 and self.tag is None and self.kind == "text"
            if one_line and not self.no_fill and self.buf[0].strip():
                self.tag, self.kind = self.buf[0].strip(), "list"
                self.buf = []
            else:
                self._flush()
        elif request in _PARAGRAPH:
            if not self.no_fill:
                self._flush()
        elif request in (".UR", ".MT"):
            if args:
                self._text(args[0], number)
        elif request in (".UE", ".ME"):
            if args:
                self._append_to_last(_inline(" ".join(args)))
        elif request == ".so":
            self.warnings.append(f"line {number}: .so {' '.join(args)} not followed")
        elif request in _IGNORED_REQUESTS or request.startswith((".\\}", ".if", ".ie", ".el")):
            return
        elif request == ".Nd":
            self._text("- " + _mdoc(" ".join(args)), number)
        elif request in (".Nm", ".Fl", ".Ar", ".Op", ".Xr", ".Pa", ".Cm", ".Ic", ".Ev"):
            self._text(_mdoc(request[1:] + " " + " ".join(args)), number)
        elif request[1:].isalpha() and 1 <= len(request) - 1 <= 2 and request[1].isupper():
            self._text(_font_macro(request, args), number)  # .B .I .BR .SM .SY …
        # any other request: dropped, never executed

    def _th(self, args: list[str]) -> None:
        keys = ("name", "section", "date", "source", "manual")
        self.th = {k: _inline(v) for k, v in zip(keys, args, strict=False) if v}
        if self.th.get("name"):
            section = self.th.get("section", "")
            self.th_title = f"{self.th['name'].lower()}({section})" if section else self.th["name"]

    def _heading_slice(self, text: str | None, number: int) -> None:
        if text:
            self.slices.append(Slice(text, number, number, self.path))

    # text ---------------------------------------------------------------------------

    def _text(self, text: str, number: int) -> None:
        if self.want_tag:
            self.want_tag = False
            self.tag = text.strip()
            self.first = number
            self.last = number
            return
        if not text.strip() and not self.no_fill:
            self._flush()
            return
        if not self.buf and self.tag is None:
            self.first = number
        self.buf.append(text)
        self.last = number

    def _append_to_last(self, text: str) -> None:
        if self.buf:
            self.buf[-1] += text

    def _flush(self) -> None:
        body = [line for line in self.buf]
        while body and not body[-1].strip():
            body.pop()
        tag, kind = self.tag, self.kind
        self.buf, self.tag, self.want_tag = [], None, False
        self.kind = "code" if self.no_fill else "text"
        if tag is not None and kind == "list":
            desc = " ".join(" ".join(body).split())
            text = f"{tag}: {desc}" if desc else tag
            self._emit(text, kind)
            return
        if not any(line.strip() for line in body):
            return
        if kind == "code":
            self._emit("\n".join(body), "code")
        else:
            self._emit("\n".join(line.strip() for line in body), "text")

    def _emit(self, text: str, kind: str) -> None:
        first, last = self.first, max(self.last, self.first)
        if first < 1:
            return
        links = tuple(Link(target=u, text=u) for u in _URL.findall(text))
        self.slices.append(Slice(text, first, last, self.path, kind=kind, links=links))
        if self.section and self.section.upper() == "NAME" and not self.name_line:
            self.name_line = " ".join(text.split())[:120]


def _split_request(line: str) -> tuple[str, list[str]]:
    """``.BR ls (1)`` -> ``(".BR", ["ls", "(1)"])`` with troff's double quotes."""
    line = line.split('\\"', 1)[0]
    body = line[1:].lstrip()
    name, _, rest = body.partition(" ")
    if "\t" in name:
        name, _, more = name.partition("\t")
        rest = more + " " + rest
    args: list[str] = []
    i, n = 0, len(rest)
    while i < n:
        if rest[i] in " \t":
            i += 1
            continue
        if rest[i] == '"':
            j = i + 1
            word = []
            while j < n:
                if rest[j] == '"':
                    if j + 1 < n and rest[j + 1] == '"':
                        word.append('"')
                        j += 2
                        continue
                    break
                word.append(rest[j])
                j += 1
            args.append("".join(word))
            i = j + 1
        else:
            j = i
            while j < n and rest[j] not in " \t":
                j += 1
            args.append(rest[i:j])
            i = j
    return "." + name, args


def _font_macro(request: str, args: list[str]) -> str:
    """``.B x y`` -> ``x y``; alternating ``.BR a b c`` -> ``abc`` (no spaces, as troff)."""
    words = [_inline(a, keep_space=True) for a in args]
    name = request[1:]
    if len(name) == 2 and name not in ("SM", "SB", "SY") and all(c in "BIR" for c in name):
        return "".join(words)
    return " ".join(words)


def _inline(text: str, keep_space: bool = False) -> str:
    """troff escapes resolved to plain text."""

    def sub(m: re.Match[str]) -> str:
        if m.group("c2") is not None:
            return _NAMED_CHARS.get(m.group("c2"), "")
        if m.group("cb") is not None:
            name = m.group("cb")
            if name.startswith("u") and len(name) in (5, 6):
                try:
                    return chr(int(name[1:], 16))
                except ValueError:
                    return ""
            return _NAMED_CHARS.get(name, "")
        string = m.group("sb") or m.group("sp") or m.group("s1")
        if string is not None:
            return _POD_STRINGS.get(string, "")
        one = m.group("one")
        if one is None:
            return ""
        return {"-": "-", "e": "\\", "\\": "\\", " ": " ", "~": " ", "0": " ", "t": "\t"}.get(
            one, "" if one in "&|^c!%{}:/,dpraz'\"" else one
        )

    out = _ESCAPE.sub(sub, text)
    return out if keep_space else out.strip()


def _mdoc(text: str) -> str:
    text = _MDOC_FLAG.sub(lambda m: "-" + m.group(1), _inline(text))
    return " ".join(_MDOC_INLINE.sub("", text).split())
