"""OCR for scanned PDF pages with the Tesseract command-line program.

No Python binding is needed: the page is rendered by pdfium to a PNG and the
``tesseract`` binary reads it. Tesseract is used only when the binary exists
and has at least one of the language packs we want (``chi_sim``, ``eng``);
otherwise the caller reports the page as "needs OCR" instead of leaving it
silently empty.

Tesseract separates Chinese characters with spaces ("电 源 管 理"); those
spaces are removed between two CJK characters so the text tokenizes like
text-layer Chinese.
"""

from __future__ import annotations

import functools
import io
import os
import re
import shutil
import subprocess
import tempfile
from typing import TYPE_CHECKING

from clawkb.parsers.sandbox import helper, run_helper

if TYPE_CHECKING:
    from pypdfium2 import PdfPage

#: Languages tried, in Tesseract's ``-l`` order.
WANTED_LANGUAGES = ("chi_sim", "eng")
#: Render resolution for OCR: 300 dpi is Tesseract's sweet spot.
OCR_DPI = 300
#: Upper bound for one page, so one bad page cannot eat the file's time limit.
PAGE_TIMEOUT_S = 120.0

_LANGS = re.compile(r"[a-z_]{2,16}(?:\+[a-z_]{2,16}){0,7}")
_CJK = r"\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uff00-\uffef"
_CJK_GAP = re.compile(rf"(?<=[{_CJK}])[ \t]+(?=[{_CJK}])")


@functools.cache
def tesseract_languages() -> tuple[str, ...]:
    """The wanted languages the installed Tesseract can read; ``()`` when unusable."""
    exe = shutil.which("tesseract")
    if exe is None:
        return ()
    try:
        out = subprocess.run(
            [exe, "--list-langs"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return ()
    have = {line.strip() for line in (out.stdout + out.stderr).splitlines()}
    return tuple(lang for lang in WANTED_LANGUAGES if lang in have)


def ocr_available() -> bool:
    return bool(tesseract_languages()) and os.environ.get("CLAWKB_NO_OCR") != "1"


def ocr_page(page: PdfPage, languages: tuple[str, ...] | None = None) -> str:
    """Recognise the text of a pdfium page; raises ``OSError`` when Tesseract fails.

    The parser runs sandboxed (no ``exec``, no file writes), so the PNG goes to
    the ``tesseract`` helper (:mod:`clawkb.parsers.sandbox`), which runs outside
    the filter and takes only image bytes and a language list.
    """
    langs = languages or tesseract_languages()
    image = page.render(scale=OCR_DPI / 72, grayscale=True).to_pil()
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    text = run_helper("tesseract", buf.getvalue(), "+".join(langs))
    return clean_ocr_text(text.decode("utf-8", "replace"))


@helper("tesseract")
def _tesseract(png: bytes, args: tuple[str, ...]) -> bytes:
    """Run Tesseract on PNG bytes; ``args`` is one ``+``-joined language list."""
    if len(args) != 1 or not _LANGS.fullmatch(args[0]):
        raise OSError("tesseract helper: expected one language list like 'chi_sim+eng'")
    with tempfile.TemporaryDirectory(prefix="clawkb-ocr-") as tmp:
        path = os.path.join(tmp, "page.png")
        with open(path, "wb") as fh:
            fh.write(png)
        try:
            done = subprocess.run(
                ["tesseract", path, "stdout", "-l", args[0], "--psm", "3"],
                capture_output=True,
                timeout=PAGE_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise OSError(f"tesseract took longer than {PAGE_TIMEOUT_S:g} s") from exc
    if done.returncode != 0:
        detail = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise OSError(f"tesseract failed: {detail[-1] if detail else done.returncode}")
    return done.stdout


def clean_ocr_text(text: str) -> str:
    """Drop form feeds and blank-line runs; join CJK characters Tesseract spaced out."""
    lines = [_CJK_GAP.sub("", line).strip() for line in text.replace("\f", "\n").split("\n")]
    out: list[str] = []
    for line in lines:
        if line or (out and out[-1]):
            out.append(line)
    return "\n".join(out).strip()
