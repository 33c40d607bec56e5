"""Real HTTP servers on 127.0.0.1 for the OpenAI-compatible embedding and rerank tests.

The embedding server answers ``/embeddings`` with vectors from the real
``static`` model (so results are meaningful); it can be told to fail or to
stall, to exercise retries and stage time budgets.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class State:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.fail_next: list[int] = []  # HTTP codes to answer with, in order
        self.delay_s = 0.0


@contextmanager
def embedding_server() -> Iterator[tuple[str, State]]:
    from clawkb.embed.static import StaticEmbedder

    model = StaticEmbedder()
    state = State()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            state.requests.append(
                {"path": self.path, "body": body, "auth": self.headers.get("Authorization")}
            )
            if state.delay_s:
                time.sleep(state.delay_s)
            if state.fail_next:
                code = state.fail_next.pop(0)
                self.send_response(code)
                self.end_headers()
                self.wfile.write(b'{"error": "injected"}')
                return
            if self.path.endswith("/embeddings"):
                vecs = model.embed_documents(body["input"])
                data = {"data": [{"index": i, "embedding": v.tolist()} for i, v in enumerate(vecs)]}
                data["data"].reverse()  # order must come from "index", not position
            elif self.path.endswith("/rerank"):
                q = model.embed_query(body["query"])
                docs = model.embed_documents(body["documents"])
                data = {
                    "results": [
                        {"index": i, "relevance_score": float(d @ q)} for i, d in enumerate(docs)
                    ]
                }
            else:
                self.send_response(404)
                self.end_headers()
                return
            raw = json.dumps(data).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", state
    finally:
        server.shutdown()
        server.server_close()
