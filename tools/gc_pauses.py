"""Full garbage collections in a busy `clawkb serve`, with and without the freeze.

    .venv/bin/python tools/gc_pauses.py [--seconds 60]

Builds the soak's KB (bench/soak.py: 180 generated files, embedded with the static
model), then for ``CLAWKB_GC_FREEZE=0`` and ``1`` in turn starts one server process
with a hook that times every collection in CPU time of the collecting thread
(``gc.callbacks``), runs 8 search clients with one API write round per 40 searches
(bench/serve_cpu.py) for ``--seconds``, and prints each generation-2 collection's
CPU milliseconds with the number of frozen objects at the time, and the objects a
full collection walks at the end.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import bench_path  # noqa: F401  (bench/ on sys.path)


def _hook(out: str) -> None:
    """In the server: time collections, write what was seen every 2 s."""
    full: list[tuple[float, int]] = []
    started: list[float] = [0.0]

    def cb(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started[0] = time.thread_time()
        elif info["generation"] == 2:
            full.append((round((time.thread_time() - started[0]) * 1000, 1), gc.get_freeze_count()))

    gc.callbacks.append(cb)

    def dump() -> None:
        while True:
            time.sleep(2)
            data = {"full": full, "walked": len(gc.get_objects()), "frozen": gc.get_freeze_count()}
            Path(out).write_text(json.dumps(data))

    threading.Thread(target=dump, daemon=True).start()


def _serve(out: str, argv: list[str]) -> None:
    _hook(out)
    from clawkb.cli.main import main

    sys.argv = ["clawkb", *argv]
    main()


def _measure(home: Path, corpus: Path, api: Path, freeze: str, seconds: float) -> dict[str, Any]:
    import serve_cpu

    out = Path(tempfile.mkdtemp()) / "gc.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLAWKB_")}
    env["CLAWKB_GC_FREEZE"] = freeze
    cmd = [sys.executable, __file__, "--serve", str(out), "--kb", str(home), "serve", str(corpus)]
    p = subprocess.Popen(
        [*cmd, "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    )
    assert p.stdout is not None
    url = ""
    while not url:
        line = p.stdout.readline()
        if not line:
            raise SystemExit("the server exited before it served")
        m = re.search(r"Serving on (http://\S+)", line)
        url = m.group(1) if m else ""
    threading.Thread(target=lambda: [None for _ in p.stdout or ()], daemon=True).start()
    writer = serve_cpu.Writer(api)
    searches, t0 = 0, time.time()
    try:
        while time.time() - t0 < seconds:
            serve_cpu.batch(url, "/api/v1/search+writes", 400, 8, writer=writer, every=40)
            searches += 400
        time.sleep(3)
        data: dict[str, Any] = json.loads(out.read_text())
    finally:
        p.terminate()
        p.wait(30)
    data["searches"] = searches
    return data


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--serve":
        _serve(sys.argv[2], sys.argv[3:])
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=60.0)
    args = ap.parse_args()
    import soak

    clawkb = str(Path(sys.executable).parent / "clawkb")
    with tempfile.TemporaryDirectory(prefix="clawkb-gc-") as tmp:
        work = Path(tmp)
        corpus = work / "corpus"
        api = corpus / "api"
        soak.write_corpus(corpus)
        api.mkdir()
        home, dense = soak._make_kb(work, corpus)
        if dense:
            subprocess.run([clawkb, "--kb", str(home), "embed"], check=True, capture_output=True)
        for freeze in ("0", "1"):
            d = _measure(home, corpus, api, freeze, args.seconds)
            after = [ms for ms, frozen in d["full"] if frozen]
            before = [ms for ms, frozen in d["full"] if not frozen]
            print(
                f"CLAWKB_GC_FREEZE={freeze}: {d['searches']} searches; full collections"
                f" (CPU ms) unfrozen {before}, frozen {after}; a full collection walks"
                f" {d['walked']} objects at the end ({d['frozen']} frozen)"
            )


if __name__ == "__main__":
    main()
