"""Warm hover latency of `clawkb lsp` on the examples KB (target: <= 150 ms).

Starts `clawkb --kb TMP lsp` as an editor does, speaks JSON-RPC over its
pipes, opens a C file whose comments ask the examples' questions, and times
`textDocument/hover` round trips after a warm-up. The named peer is the same
search run in-process (`KnowledgeBase.search`, limit 3) in the same run, so
the ratio is what the language server adds (JSON-RPC, cursor analysis,
Markdown). The server's CPU time per hover comes from psutil.

    .venv/bin/python bench/lsp_hover.py [--rounds 20]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parents[1]
CLAWKB = str(Path(sys.executable).parent / "clawkb")
COMMENTS = [
    "DDR4 differential trace impedance",
    "串口没有输出怎么办",
    "GPIOA_MODER reset value",
    "rkdeveloptool db 超时",
    "TJA1051 silent mode pin",
    "BME280 I2C address",
]


class Rpc:
    """A minimal blocking LSP client over a subprocess's pipes."""

    def __init__(self, cmd: list[str]) -> None:
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.next_id = 0

    def send(self, method: str, params: Any, *, request: bool = True) -> Any:
        msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
        if request:
            self.next_id += 1
            msg["id"] = self.next_id
        body = json.dumps(msg).encode()
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()
        while request:
            reply = self.read()
            if reply.get("id") == self.next_id and "method" not in reply:
                return reply.get("result")
        return None

    def read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        length = 0
        while True:
            line = self.proc.stdout.readline()
            if line in (b"\r\n", b""):
                break
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        result: dict[str, Any] = json.loads(self.proc.stdout.read(length))
        return result


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=20)
    args = ap.parse_args()
    from clawkb.kb import KnowledgeBase

    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / ".clawkb"
        with KnowledgeBase.open(home, create=True) as kb:
            kb.index([str(ROOT / "examples" / "notes")])
            kb.search("warm", limit=3)
            peer = []
            for _ in range(args.rounds):
                for q in COMMENTS:
                    t0 = time.perf_counter()
                    kb.search(q, limit=3)
                    peer.append((time.perf_counter() - t0) * 1000)

        rpc = Rpc([CLAWKB, "--kb", str(home), "lsp"])
        root = Path(tmp).as_uri()
        rpc.send("initialize", {"processId": None, "rootUri": root, "capabilities": {}})
        rpc.send("initialized", {}, request=False)
        uri = f"{root}/board.c"
        text = "".join(f"// {c}\nint x{i};\n" for i, c in enumerate(COMMENTS))
        rpc.send(
            "textDocument/didOpen",
            {"textDocument": {"uri": uri, "languageId": "c", "version": 1, "text": text}},
            request=False,
        )

        def hover(i: int) -> float:
            t0 = time.perf_counter()
            res = rpc.send(
                "textDocument/hover",
                {"textDocument": {"uri": uri}, "position": {"line": 2 * i, "character": 5}},
            )
            ms = (time.perf_counter() - t0) * 1000
            assert res and "clawkb" in res["contents"]["value"], res
            return ms

        for i in range(len(COMMENTS)):  # warm-up: every query once
            hover(i)
        server = psutil.Process(rpc.proc.pid)
        cpu0 = sum(server.cpu_times()[:2])
        lsp = [hover(i) for _ in range(args.rounds) for i in range(len(COMMENTS))]
        cpu_ms = (sum(server.cpu_times()[:2]) - cpu0) * 1000 / len(lsp)
        rpc.send("shutdown", None)
        rpc.send("exit", None, request=False)
        rpc.proc.wait(timeout=30)

    def pct(xs: list[float], p: float) -> float:
        return sorted(xs)[min(len(xs) - 1, int(p * len(xs)))]

    report = {
        "hovers": len(lsp),
        "lsp_hover_ms": {"p50": round(statistics.median(lsp), 2), "p95": round(pct(lsp, 0.95), 2)},
        "server_cpu_ms_per_hover": round(cpu_ms, 2),
        "peer_in_process_search_ms": {
            "p50": round(statistics.median(peer), 2),
            "p95": round(pct(peer, 0.95), 2),
        },
        "ratio_p50_lsp_vs_in_process": round(statistics.median(lsp) / statistics.median(peer), 2),
        "target_ms": 150,
    }
    print(json.dumps(report, indent=2))
    return 0 if report["lsp_hover_ms"]["p50"] <= 150 else 1


if __name__ == "__main__":
    sys.exit(main())
