"""The serving process's garbage-collector policy (clawkb.server.collector): what is
alive after the first search is frozen out of full collections, in a subprocess and
through a real server's /metrics; ``CLAWKB_GC_FREEZE=0`` leaves the collector alone."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from server_helpers import make_kb, serving

_PROCESS = """
import gc, threading, time
from clawkb.server import collector
table = {f"word{i}": [i] for i in range(50000)}  # a long-lived table, as a tokenizer's
collector.after_search()
collector.after_search()  # the second search does nothing more
for t in threading.enumerate():
    if t.name == "clawkb-gc-freeze":
        t.join()
walked = any(o is table for o in gc.get_objects())  # what a full collection walks
print(collector.frozen(), walked)
"""


def _run(env: dict[str, str]) -> tuple[int, bool]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("CLAWKB_")}
    out = subprocess.run(
        [sys.executable, "-c", _PROCESS], env={**clean, **env}, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    frozen, walked = out.stdout.split()
    return int(frozen), walked == "True"


def test_the_first_search_freezes_what_the_process_holds() -> None:
    frozen, walked = _run({})
    assert frozen > 50_000  # the table's lists and everything imported
    assert not walked  # a full collection no longer walks the table


def test_freezing_can_be_switched_off() -> None:
    frozen, walked = _run({"CLAWKB_GC_FREEZE": "0"})
    assert frozen == 0 and walked


def _frozen_gauge(text: str) -> float:
    m = re.search(r"^clawkb_gc_frozen_objects (\S+)$", text, re.M)
    assert m, text[-2000:]
    return float(m.group(1))


def test_a_real_server_freezes_after_its_warm_up_search(tmp_path: Path) -> None:
    """The server searches once itself before its first request (Runtime.warm) and
    freezes what that loaded: the first request finds it frozen already."""
    home, docs, _ = make_kb(tmp_path)
    with serving(home, [docs]) as srv:
        before = _frozen_gauge(srv.get("/metrics").text)
        assert before > 10_000
        assert srv.get("/api/v1/search", params={"q": "uart"}).status_code == 200
        # once, at start: no second freeze (frozen objects can only be freed since)
        assert _frozen_gauge(srv.get("/metrics").text) <= before
    with serving(home, [docs], env={"CLAWKB_GC_FREEZE": "0"}) as srv:
        assert srv.get("/api/v1/search", params={"q": "uart"}).status_code == 200
        assert _frozen_gauge(srv.get("/metrics").text) == 0


def test_switching_it_off_is_not_an_unknown_setting(tmp_path: Path) -> None:
    from clawkb.config import Config

    cfg = Config.load(tmp_path, env={"CLAWKB_GC_FREEZE": "0"})  # the CLI would refuse it
    assert cfg.max_tokens == Config().max_tokens


_WARM = """
import sys
from pathlib import Path
from clawkb.server.runtime import Runtime
before = "clawkb.retrieve.pipeline" in sys.modules
rt = Runtime(Path(sys.argv[1]), writer_process=False)
rt.warm()
print(before, "clawkb.retrieve.pipeline" in sys.modules, "clawkb.retrieve.hits" in sys.modules)
rt.close()
"""


def test_a_runtime_warms_the_search_path_before_its_first_request(tmp_path: Path) -> None:
    home, _, _ = make_kb(tmp_path)
    clean = {k: v for k, v in os.environ.items() if not k.startswith("CLAWKB_")}
    out = subprocess.run(
        [sys.executable, "-c", _WARM, str(home)], env=clean, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "True", "True"]
