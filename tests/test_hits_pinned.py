"""Hit output on the bundled examples is pinned: ids, scores, anchors, snippets, highlights.

Hit building is tuned for speed (issue 14 item 4); this test holds its output
to what it was before, on every query of the examples' golden and question
files. The expected output lives in ``tests/data/hits-pinned.json``; when a
deliberate change alters it (a new tokenizer version, a scoring change),
regenerate with ``python tests/test_hits_pinned.py`` and review the diff.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import yaml

from clawkb.kb import KnowledgeBase
from clawkb.retrieve.hits import anchor_dict

ROOT = Path(__file__).resolve().parents[1]
PINNED = ROOT / "tests" / "data" / "hits-pinned.json"
TOP = 5  # hits with snippets per query
DEEP = 30  # ranking without snippets (what `clawkb eval` asks for)


def _queries() -> list[str]:
    out: list[str] = []
    for name in ("golden.yaml", "hardware-golden.yaml", "questions.yaml"):
        data = yaml.safe_load((ROOT / "examples" / name).read_text("utf-8"))
        for key in ("queries", "questions", "unanswerable"):
            for item in data.get(key) or []:
                text = item if isinstance(item, str) else item.get("query") or item.get("question")
                if text:
                    out.append(text)
    return list(dict.fromkeys(out))


def _portable(d: dict[str, Any]) -> dict[str, Any]:
    """An anchor without the checkout's location: paths relative to the repository, the
    anchor id (a hash over the absolute path) replaced by that relative location."""
    root = str(ROOT) + "/"
    out = {k: v for k, v in d.items() if k != "anchor"}
    out["path"] = str(d["path"]).removeprefix(root)
    out["location"] = str(d["location"]).removeprefix(root)
    return out


def _collect(kb_dir: Path) -> dict[str, Any]:
    with KnowledgeBase.open(kb_dir, create=True) as kb:
        kb.index([str(ROOT / "examples")])
        out: dict[str, Any] = {}
        for q in _queries():
            res = kb.search(q, limit=TOP)
            deep = kb.search(q, limit=DEEP, snippets=False)
            out[q] = {
                "tokens": res.query_tokens,
                "hits": [
                    {
                        **_portable(anchor_dict(h.anchor)),
                        "rank": h.rank,
                        "score": round(h.score, 4),
                        "matched_terms": list(h.matched_terms),
                        "snippet": h.snippet,
                        "highlights": [list(s) for s in h.highlights],
                    }
                    for h in res.hits
                ],
                "deep": [
                    [_portable(anchor_dict(h.anchor))["location"], round(h.score, 4)]
                    for h in deep.hits
                ],
                "deep_snippets": sorted({h.snippet + str(h.highlights) for h in deep.hits}),
            }
        return out


def test_hit_output_matches_pinned(tmp_path: Path) -> None:
    want = json.loads(PINNED.read_text("utf-8"))
    got = _collect(tmp_path / "kb")
    assert sorted(got) == sorted(want)
    for q, w in want.items():
        g = got[q]
        assert g["tokens"] == w["tokens"], q
        assert g["deep"] == w["deep"], q
        assert set(g["deep_snippets"]) <= {"()"}, q  # snippets=False builds none
        for gh, wh in zip(g["hits"], w["hits"], strict=True):
            assert gh == wh, q


if __name__ == "__main__":  # regenerate the pinned output
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        data = _collect(Path(tmp) / "kb")
    for v in data.values():
        del v["deep_snippets"]
    lines = [json.dumps(q, ensure_ascii=False) + ": " + json.dumps(v, ensure_ascii=False)
             for q, v in data.items()]  # fmt: skip
    PINNED.write_text("{\n" + ",\n".join(lines) + "\n}\n", encoding="utf-8")
    print(f"wrote {PINNED} ({len(data)} queries)", file=sys.stderr)
