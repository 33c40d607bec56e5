"""Keep the PDF libraries' own log lines and warnings off the user's terminal.

pdfminer (under pdfplumber) reports harmless font quirks through Python
logging — "Could not get FontBBox from font descriptor…" once per glyph run on
many browser-printed PDFs — and, with no logging configured, Python prints
every such WARNING to stderr. While a PDF is parsed, :func:`library_log`
collects those records (and any ``warnings.warn`` from the libraries) and
re-logs each distinct message once, at DEBUG level, on the
``clawkb.parsers.pdf`` logger: visible to whoever configures logging, silent
in the CLI's output. Nothing about the file's content is lost: these messages
describe font metrics, not text.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

LOG = logging.getLogger("clawkb.parsers.pdf")
#: Loggers of the libraries the PDF parser drives.
LIBRARY_LOGGERS = ("pdfminer", "pdfplumber")


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: dict[str, int] = {}

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.WARNING:
            try:
                text = record.getMessage()
            except Exception:  # a library's bad format string is not our failure
                text = str(record.msg)
            self.messages[text] = self.messages.get(text, 0) + 1


@contextmanager
def library_log(path: str) -> Iterator[None]:
    """Collect library log records and warnings while parsing ``path``."""
    handler = _Collect()
    saved = []
    for name in LIBRARY_LOGGERS:
        logger = logging.getLogger(name)
        saved.append((logger, logger.propagate))
        logger.addHandler(handler)
        logger.propagate = False
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield
    finally:
        for logger, propagate in saved:
            logger.removeHandler(handler)
            logger.propagate = propagate
    for w in caught:
        text = f"{w.category.__name__}: {w.message}"
        handler.messages[text] = handler.messages.get(text, 0) + 1
    for text, count in handler.messages.items():
        LOG.debug("%s: %s (x%d)", path, text, count)
