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
    home, env = _kb(tmp_path, 640)  # 640 chunks (the bare title glues onto section 0) = 11 batches
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
    assert total == 640 and all(int(m.group(2)) == total for m in progress)
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


SLOW_PARSER = """
import time

from clawkb.types import ParsedDocument, Slice


class SlowNotes:
    name = "slow-notes"
    extensions = (".slow",)
    mime_types = ("text/x-slow",)

    def parse(self, data, path):
        time.sleep(0.1)
        return ParsedDocument(slices=(Slice(data.decode("utf-8"), 1, 1, ()),), title=path)
"""


def test_ctrl_c_during_index_says_how_far_it_got_and_resumes(tmp_path: Path) -> None:
    from plugin_helpers import install_dist

    env = install_dist(
        tmp_path / "site",
        "slownotes",
        "0.1",
        {"slownotes": SLOW_PARSER},
        "[clawkb.parsers]\nslow-notes = slownotes:SlowNotes\n",
    )
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(60):
        (docs / f"n{i:03d}.slow").write_text(f"note {i}: relay K{i} closes at step {i}\n")
    home = tmp_path / "kb"
    home.mkdir()
    (home / "config.yaml").write_text("progress_interval_s: 0.3\n", encoding="utf-8")
    proc = subprocess.Popen(
        [sys.executable, "-m", "clawkb.cli.main", "--kb", str(home), "index", str(docs)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    seen: list[str] = []
    line = re.compile(r"^index: (\d+)/60 files \(\d+%\) · [\d.]+ files/s · ETA ")
    while True:
        text = proc.stderr.readline()
        if not text:
            break
        seen.append(text.rstrip("\n"))
        if line.match(seen[-1]):
            proc.send_signal(signal.SIGINT)
            break
    _out, rest = proc.communicate(timeout=60)
    err = "\n".join(seen) + "\n" + rest
    assert proc.returncode == 130, err
    stop = re.search(r"^index: stopped after (\d+) of 60 files; run again to resume$", err, re.M)
    assert stop is not None and 0 < int(stop.group(1)) < 60, err
    assert "Traceback" not in err

    again = clawkb(env, "--kb", str(home), "index", str(docs))
    assert again.returncode == 0, again.stderr
    added = int(re.search(r"added (\d+)", again.stdout).group(1))  # type: ignore[union-attr]
    unchanged = int(re.search(r"unchanged (\d+)", again.stdout).group(1))  # type: ignore[union-attr]
    assert added + unchanged == 60 and added < 60
