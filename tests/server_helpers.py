"""Run a real `clawkb serve` on a loopback port for the server tests.

The server is a subprocess (the CLI as users run it, port 0 = a free port);
the URL is read from its "Serving on ..." line.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

CLAWKB = str(Path(sys.executable).parent / "clawkb")
REPO = Path(__file__).resolve().parents[1]

DOCS = {
    "layout/ddr.md": (
        "# DDR 布线规则\n\n"
        "## 阻抗控制\n\n"
        "DDR4 单端走线阻抗 50Ω，差分走线阻抗 100Ω。\n"
        "阻抗计算用板厂给的叠层参数。\n\n"
        "## 长度匹配\n\n"
        "DQ 与 DQS 同组等长，误差 ±5 mil。\n"
    ),
    "uart.md": (
        "# Debug console\n\n"
        "## UART2\n\n"
        "The debug console is UART2. Its baud rate is 1500000, 8N1, on header J6.\n\n"
        "## UART3\n\n"
        "UART3 is free for users on the 40-pin header.\n"
    ),
    "hostile.md": (
        "# Hostile page\n\n"
        'A note with markup: <script>alert("xss")</script> and <img src=x onerror=alert(1)> '
        "about the watchdog timer WDT reload value.\n"
    ),
}


def write_docs(root: Path, docs: dict[str, str] = DOCS) -> None:
    for rel, text in docs.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")


def make_kb(tmp: Path) -> tuple[Path, Path, Path]:
    """(kb home, docs root, datasheet root) with docs and example datasheets indexed."""
    root = tmp / "team-kb"
    write_docs(root)
    sheets = root / "datasheets"
    shutil.copytree(REPO / "examples" / "datasheets", sheets)
    home = tmp / "kb"
    from clawkb import KnowledgeBase
    from clawkb.hardware import index_datasheets

    with KnowledgeBase.open(home, create=True) as kb:
        kb.index([root])
        index_datasheets(kb, datasheets=[sheets])
    return home, root, sheets


class Server:
    def __init__(self, proc: subprocess.Popen[str], url: str, token: str | None) -> None:
        self.proc, self.url, self.token = proc, url, token
        headers = {"authorization": f"Bearer {token}"} if token else {}
        self.http = httpx.Client(base_url=url, headers=headers, timeout=30, trust_env=False)
        self.lines: list[str] = []

    def get(self, path: str, **kw: Any) -> httpx.Response:
        return self.http.get(path, **kw)

    def post(self, path: str, **kw: Any) -> httpx.Response:
        return self.http.post(path, **kw)

    def ok(self, method: str, path: str, **kw: Any) -> Any:
        r = self.http.request(method, path, **kw)
        assert r.status_code == 200, f"{method} {path}: {r.status_code} {r.text}\n" + "".join(
            self.lines[-40:]
        )
        return r.json()


@contextmanager
def serving(
    home: Path,
    paths: Sequence[Path] = (),
    *,
    args: Sequence[str] = (),
    token: str | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 60.0,
) -> Iterator[Server]:
    cmd = [CLAWKB, "--kb", str(home), "serve", *map(str, paths), "--port", "0", *args]
    if token:
        cmd += ["--token", token]
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("CLAWKB_")}
    full_env.update(env or {})
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=full_env
    )
    assert proc.stdout is not None
    lines: list[str] = []
    url = _read_url(proc, lines, timeout)
    server = Server(proc, url, token)
    server.lines = lines
    drain = threading.Thread(target=lambda: lines.extend(proc.stdout or ()), daemon=True)
    drain.start()
    try:
        yield server
    finally:
        server.http.close()
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        drain.join(5)
        if proc.stdout:
            proc.stdout.close()


def _read_url(proc: subprocess.Popen[str], lines: list[str], timeout: float) -> str:
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            if proc.poll() is not None:
                raise AssertionError("clawkb serve exited:\n" + "".join(lines))
            continue
        lines.append(line)
        m = re.search(r"Serving on (http://\S+)", line)
        if m:
            return m.group(1)
    proc.kill()
    raise AssertionError("clawkb serve printed no URL:\n" + "".join(lines))


def poll(fn: Any, timeout: float = 15.0, every: float = 0.1) -> Any:
    """Call ``fn`` until it returns something truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(every)
    raise AssertionError(f"condition not met within {timeout}s (last: {last!r})")


@contextmanager
def browser_page(url: str, locale: str = "en-US") -> Iterator[Any]:
    """A page of Debian's headless chromium (driven by Playwright) opened at ``url``,
    or None when Playwright or chromium is missing (the caller then skips its checks)."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        yield None
        return
    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    if not Path(chromium).exists():
        yield None
        return
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=chromium, args=["--headless", "--no-sandbox"])
        try:
            page = b.new_context(locale=locale).new_page()
            page.goto(url)
            yield page
        finally:
            b.close()
