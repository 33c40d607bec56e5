"""bench/ holds what `make bench` runs and nothing else.

Every ``bench/*.py`` must be a step of a stage in ``bench/stages.py`` (the runner the
Makefile's ``bench`` target calls), or a helper one of those imports or starts as a child
(``HERE / "lexical.py"``), directly or through another helper. A one-off investigation
belongs in the git history once its numbers are in ``bench/results``; a script that writes
a shipped file belongs in ``tools/``.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
sys.path.insert(0, str(BENCH))

import stages  # noqa: E402


def _bench_recipe() -> list[str]:
    lines = (ROOT / "Makefile").read_text("utf-8").splitlines()
    start = lines.index(next(ln for ln in lines if re.match(r"bench\s*:", ln)))
    recipe = []
    for ln in lines[start + 1 :]:
        if not ln.startswith("\t"):
            break
        recipe.append(ln.strip())
    return recipe


def _references(path: Path, names: set[str]) -> set[str]:
    """The bench modules ``path`` imports (anywhere in it) or starts as a child process
    through a path it builds (``HERE / "lexical.py"``); a mention in prose does not count."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module.split(".")[0])
        elif (
            isinstance(node, ast.BinOp)
            and isinstance(node.op, ast.Div)
            and isinstance(node.right, ast.Constant)
            and isinstance(node.right.value, str)
            and node.right.value.endswith(".py")
        ):
            found.add(node.right.value.removesuffix(".py"))
    return found & names


def _steps() -> list[stages.Step]:
    return [
        step
        for quick in ([], ["--quick"])
        for stage in stages.STAGES.values()
        for step in stage.steps(stages.parse(quick))
    ]


def test_make_bench_runs_the_stage_runner() -> None:
    recipe = _bench_recipe()
    assert any("bench/stages.py" in ln for ln in recipe), recipe
    # the runner is the one entry: no script is called from the recipe behind its back
    assert all(re.findall(r"bench/\w+\.py", ln) == ["bench/stages.py"] for ln in recipe)


def test_every_stage_step_exists_and_has_a_quick_mode() -> None:
    for name, stage in stages.STAGES.items():
        full = stage.steps(stages.parse([]))
        quick = stage.steps(stages.parse(["--quick"]))
        assert full and [s.script for s in full] == [s.script for s in quick], name
        for step in full:
            assert (BENCH / step.script).is_file(), f"stage {name}: {step.script} is missing"


def test_every_bench_script_is_reached_from_make_bench() -> None:
    names = {p.stem for p in BENCH.glob("*.py")}
    reached = {"stages"} | {Path(s.script).stem for s in _steps()}
    todo = list(reached)
    while todo:
        for dep in _references(BENCH / f"{todo.pop()}.py", names) - reached:
            reached.add(dep)
            todo.append(dep)
    strays = sorted(names - reached)
    assert not strays, (
        f"bench/{', bench/'.join(s + '.py' for s in strays)}: neither a stage step of"
        " bench/stages.py nor a helper one uses; record its numbers in bench/results and"
        " remove it, fold it into a stage, or move a tool to tools/"
    )


def test_a_quick_run_keeps_the_recorded_results(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    results, quick = tmp_path / "results", tmp_path / "quick"
    results.mkdir()
    (results / "kept.md").write_text("recorded\n")
    (results / "changed.json").write_text('{"n": 1}\n')
    (results / "deleted.md").write_text("recorded too\n")
    monkeypatch.setattr(stages, "RESULTS", results)
    with stages.results_kept(quick):
        (results / "changed.json").write_text('{"n": 2}\n')
        (results / "new.md").write_text("quick run\n")
        (results / "deleted.md").unlink()
    assert (results / "changed.json").read_text() == '{"n": 1}\n'
    assert (results / "deleted.md").read_text() == "recorded too\n"
    assert not (results / "new.md").exists()
    assert sorted(p.name for p in quick.iterdir()) == ["changed.json", "new.md"]
    assert (quick / "changed.json").read_text() == '{"n": 2}\n'


def test_tools_are_documented() -> None:
    readme = (ROOT / "tools" / "README.md").read_text("utf-8")
    for tool in sorted((ROOT / "tools").glob("*.py")):
        assert tool.name in readme, f"tools/{tool.name} is not in tools/README.md"


@pytest.mark.parametrize(
    "tool", sorted(p.name for p in (ROOT / "tools").glob("*.py") if p.name != "bench_path.py")
)
def test_tools_start_from_any_folder(tool: str, tmp_path: Path) -> None:
    """A tool finds bench/'s helpers it imports wherever it is started from."""
    run = subprocess.run(
        [sys.executable, str(ROOT / "tools" / tool), "--help"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert "usage:" in run.stdout
