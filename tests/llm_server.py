"""A small deterministic OpenAI-compatible chat server for tests and demos.

Runs for real on 127.0.0.1 (``http.server`` in a thread) and speaks
``POST /v1/chat/completions``, plain JSON and SSE streaming. It "answers"
from the context it receives: among the ``<passage n=..>`` elements in the
user message it quotes the sentence sharing the most words with the question
and cites that passage as ``[n]``, so citations are checkable.

The ``model`` name selects a behaviour:

* ``echo`` (any other name too): the answer described above;
* ``bogus``: the answer plus a citation to a passage that does not exist;
* ``fail-500``: always HTTP 500 with an OpenAI-style error body;
* ``flaky``: HTTP 503 for the first ``flaky_failures`` requests, then ``echo``;
* ``slow``: sleeps ``slow_s`` seconds before answering;
* ``garbage``: HTTP 200 with a body that is not a chat completion;
* ``auth``: HTTP 401 unless the request carries ``Bearer sekrit``;
* ``rate-limited``: HTTP 429 with ``Retry-After: retry_after`` for the first
  ``flaky_failures`` requests, then ``echo``.

Every request is recorded in ``requests`` with its arrival time (``at``).
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_PASSAGE = re.compile(r"<passage n=\"(\d+)\"[^>]*>\n(.*?)\n</passage>", re.DOTALL)
_SENT_END = re.compile(r"(?<=[。！？；])|(?<=[.!?;])\s+")
_WORD = re.compile(r"[a-z0-9_]+")
_RULE = re.compile(r"^\s*\|?\s*:?-{3,}")
_CJK = re.compile(r"[\u4e00-\u9fff]+")
_STOP = {
    "the",
    "a",
    "an",
    "of",
    "is",
    "are",
    "what",
    "which",
    "how",
    "does",
    "do",
    "to",
    "in",
    "on",
    "for",
    "and",
    "it",
    "its",
}


def _words(text: str) -> set[str]:
    low = text.lower()
    out = {w for w in _WORD.findall(low) if w not in _STOP}
    for run in _CJK.findall(low):
        out.update(run[i : i + 2] for i in range(len(run) - 1))
    return out


def _sentences(body: str) -> list[str]:
    """Paragraph-aware sentences; table rows carry their column names."""
    out: list[str] = []
    para: list[str] = []
    header: list[str] = []
    lines = body.splitlines()
    for i, line in enumerate(lines):
        if line.lstrip().startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if i + 1 < len(lines) and _RULE.match(lines[i + 1]):
                header = cells
            elif not _RULE.match(line):
                pairs = zip(header, cells, strict=False) if len(header) == len(cells) else []
                out.append("; ".join(f"{h}: {c}" for h, c in pairs) or " | ".join(cells))
            continue
        if line.strip() and not re.match(r"^\s*(?:[-*+>#]|\d+[.)]|```)", line):
            para.append(line.strip())
            continue
        if para:
            out += _SENT_END.split(" ".join(para))
            para = []
        if line.strip():
            out += _SENT_END.split(line.strip(" #-*>"))
    if para:
        out += _SENT_END.split(" ".join(para))
    return [p.strip() for p in out if p.strip()]


def deterministic_answer(user: str) -> str:
    """Quote the context sentence sharing the most words with the question; cite it.

    Ties go to the earlier (better-ranked) passage, so the reply is fully
    determined by the prompt.
    """
    passages = [(int(n), _sentences(body)) for n, body in _PASSAGE.findall(user)]
    tail = user[user.rfind("</passage>") + len("</passage>") :] if passages else user
    lines = [ln.strip() for ln in tail.splitlines() if ln.strip()]
    question = lines[-1].split(":", 1)[-1] if lines else ""
    q = _words(question)
    best, best_n, best_score = "", 0, 0
    for n, sents in passages:
        for sent in sents:
            score = len(q & _words(sent))
            if score > best_score:
                best, best_n, best_score = sent, n, score
    if not best_score:
        return "not found in the knowledge base"
    return f"{best} [{best_n}]"


class _Handler(BaseHTTPRequestHandler):
    server: LLMTestServer

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_POST(self) -> None:
        if self.path.rstrip("/") != "/v1/chat/completions":
            return self._json(404, {"error": {"message": f"no route {self.path}"}})
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        self.server.requests.append(
            {"headers": dict(self.headers), "body": body, "at": time.monotonic()}
        )
        model = body.get("model", "echo")
        if model == "fail-500":
            return self._json(500, {"error": {"message": "the model crashed"}})
        if model == "flaky" and self.server.count("flaky") <= self.server.flaky_failures:
            return self._json(503, {"error": {"message": "overloaded"}})
        if model == "rate-limited" and self.server.count(model) <= self.server.flaky_failures:
            data = json.dumps({"error": {"message": "slow down"}}).encode()
            self.send_response(429)
            self.send_header("Retry-After", self.server.retry_after)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return None
        if model == "auth" and self.headers.get("Authorization") != "Bearer sekrit":
            return self._json(401, {"error": {"message": "invalid api key"}})
        if model == "slow":
            time.sleep(self.server.slow_s)
        if model == "garbage":
            return self._raw(200, b"<html>not an API</html>", "text/html")
        user = next((m["content"] for m in reversed(body["messages"]) if m["role"] == "user"), "")
        text = deterministic_answer(user)
        if model == "bogus":
            text += " See also [99] and [2, 42]."
        if body.get("stream"):
            return self._stream(model, text)
        self._json(
            200,
            {
                "id": "cmpl-test",
                "object": "chat.completion",
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": text},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": len(user) // 4, "completion_tokens": len(text) // 4},
            },
        )

    def _stream(self, model: str, text: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        pieces = [text[i : i + 7] for i in range(0, len(text), 7)]
        for k, piece in enumerate(pieces):
            event = {
                "object": "chat.completion.chunk",
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "delta": {"content": piece},
                        "finish_reason": "stop" if k == len(pieces) - 1 else None,
                    }
                ],
            }
            self.wfile.write(f"data: {json.dumps(event, ensure_ascii=False)}\n\n".encode())
            self.wfile.flush()
        self.wfile.write(b"data: [DONE]\n\n")

    def _json(self, code: int, obj: dict[str, Any]) -> None:
        self._raw(code, json.dumps(obj, ensure_ascii=False).encode(), "application/json")

    def _raw(self, code: int, data: bytes, ctype: str) -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class LLMTestServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(
        self, flaky_failures: int = 2, slow_s: float = 2.0, retry_after: str = "1"
    ) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.requests: list[dict[str, Any]] = []
        self.flaky_failures = flaky_failures
        self.slow_s = slow_s
        self.retry_after = retry_after
        self._counts: dict[str, int] = {}
        self._lock = threading.Lock()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that timed out and hung up is expected here, not an error."""
        import sys

        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)

    def count(self, key: str) -> int:
        with self._lock:
            self._counts[key] = self._counts.get(key, 0) + 1
            return self._counts[key]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


@contextmanager
def running_server(**kwargs: Any) -> Iterator[LLMTestServer]:
    """Start the server on a free loopback port; stop it on exit."""
    server = LLMTestServer(**kwargs)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


if __name__ == "__main__":  # demo: python tests/llm_server.py
    with running_server() as srv:
        print(f"serving on {srv.base_url} (Ctrl-C to stop)", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
