"""Long jobs report progress when piped and stop cleanly on Ctrl-C (real subprocess, SIGINT)."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from clawkb.cli.progress import JobProgress
from plugin_helpers import clawkb, install_slow_embedder

LINE = re.compile(r"^embed: (\d+)/(\d+) chunks \(\d+%\) · [\d.]+ chunks/s · ETA \d+:\d\d:\d\d$")
STOPPED = re.compile(r"^embed: stopped after (\d+) of (\d+) chunks; run again to resume$", re.M)


def _kb(tmp_path: Path, sections: int) -> tuple[Path, dict[str, str]]:
    env = install_slow_embedder(tmp_path / "site")
    docs = tmp_path / "docs"
    docs.mkdir()
    body = "\n\n".join(
        f"## Register {i}\n\nRegister R{i} holds value {i * 7} after reset."
        for i in range(sections)
    )
    (docs / "regs.md").write_text(f"# Registers\n\n{body}\n", encoding="utf-8")
    home = tmp_path / "kb"
    home.mkdir()
    (home / "config.yaml").write_text(
        "embedding:\n  model: slow-fake\n  options: {delay: 0.4}\nprogress_interval_s: 0.3\n",
        encoding="utf-8",
    )
    res = clawkb(env, "--kb", str(home), "index", str(docs))
    assert res.returncode == 0, res.stderr
    return home, env


def test_piped_embed_prints_lines_and_ctrl_c_says_how_far_it_got(tmp_path: Path) -> None:
    home, env = _kb(tmp_path, 640)  # 641 chunks (with the title's) = 11 batches, 0.4 s each
    proc = subprocess.Popen(
        [sys.executable, "-m", "clawkb.cli.main", "--kb", str(home), "embed"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    seen: list[str] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        seen.append(line.rstrip("\n"))
        if sum(bool(LINE.match(s)) for s in seen) >= 2:
            proc.send_signal(signal.SIGINT)
            break
    _out, rest_err = proc.communicate(timeout=60)
    err = "\n".join(seen) + "\n" + rest_err
    progress = [LINE.match(s) for s in seen if LINE.match(s)]
    assert len(progress) >= 2, err  # a line every interval although stderr is a pipe
    total = int(progress[0].group(2))
    assert total == 641 and all(int(m.group(2)) == total for m in progress)
    assert f"knowledge base: {home}" in err
    assert proc.returncode == 130, err
    stop = STOPPED.search(err)
    assert stop is not None, err
    done = int(stop.group(1))
    assert int(stop.group(2)) == total and 0 < done < total
    assert "Traceback" not in err and "Aborted!" not in err

    # run again: only the rest is embedded
    again = clawkb({**env, "CLAWKB_EMBEDDING_OPTIONS": "{delay: 0}"}, "--kb", str(home), "embed")
    assert again.returncode == 0, again.stderr
    assert f"embedded {total - done} · reused 0 · {total} chunks with vectors" in again.stdout


def test_lines_only_after_an_interval_and_never_on_a_quiet_run(tmp_path: Path) -> None:
    out = tmp_path / "log.txt"
    with out.open("w") as stream:
        bar = JobProgress("index", "files", interval=3600, stream=stream)
        with bar:
            for i in range(1, 101):
                bar(i, 100)
    assert out.read_text() == ""  # a short job prints nothing
    with out.open("w") as stream:
        bar = JobProgress("index", "files", interval=0.0, stream=stream)
        with bar:
            bar(25, 100)
            bar(100, 100)
    lines = out.read_text().splitlines()
    assert lines[0].startswith("index: 25/100 files (25%) · ") and "ETA " in lines[0]
    assert lines[-1].startswith("index: 100/100 files (100%)")
