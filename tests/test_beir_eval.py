"""BEIR loader errors and the end-to-end evaluation runner on the bundled slices."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from clawkb.cli.evaluate import eval_cmd
from clawkb.errors import ClawkbError, ConfigError, NotFoundError
from clawkb.evaluate.beir import load_beir
from clawkb.evaluate.runner import evaluate_dataset

MINI = Path(__file__).parent / "data" / "beir-mini"


def write_dataset(
    folder: Path,
    *,
    corpus: str | None = None,
    queries: str | None = None,
    qrels: str | None = None,
) -> Path:
    """A tiny valid dataset; pass a string to replace one file's content."""
    folder.mkdir(parents=True, exist_ok=True)
    docs = [
        {"_id": "a", "title": "DDR layout", "text": "DDR4 走线阻抗控制 40 欧姆"},
        {"_id": "b", "title": "UART", "text": "UART baud rate 115200 configuration"},
    ]
    qs = [{"_id": "q1", "text": "DDR 阻抗"}, {"_id": "q2", "text": "unjudged"}]
    default_corpus = "".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs)
    default_queries = "".join(json.dumps(q, ensure_ascii=False) + "\n" for q in qs)
    (folder / "corpus.jsonl").write_text(corpus if corpus is not None else default_corpus, "utf-8")
    (folder / "queries.jsonl").write_text(
        queries if queries is not None else default_queries, "utf-8"
    )
    default_qrels = "query-id\tcorpus-id\tscore\nq1\ta\t2\nq1\tb\t0\n"
    (folder / "qrels.tsv").write_text(qrels if qrels is not None else default_qrels, "utf-8")
    return folder


def test_load_keeps_only_judged_queries(tmp_path: Path) -> None:
    data = load_beir(write_dataset(tmp_path / "tiny"))
    assert data.name == "tiny"
    assert [d.id for d in data.docs] == ["a", "b"]
    assert data.docs[0].title == "DDR layout"
    assert [q.id for q in data.queries] == ["q1"]
    assert data.queries[0].qrels == {"a": 2, "b": 0}


def test_bundled_slices_load() -> None:
    cmrc = load_beir(MINI / "cmrc2018-dev")
    cran = load_beir(MINI / "cranfield")
    assert (len(cmrc.docs), len(cmrc.queries)) == (200, 30)
    assert (len(cran.docs), len(cran.queries)) == (200, 20)
    doc_ids = {d.id for d in cran.docs}
    assert all(set(q.qrels) <= doc_ids for q in cran.queries)  # every judged doc is present
    assert {g for q in cran.queries for g in q.qrels.values()} > {1}  # graded, not binary


def test_missing_folder_and_file(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match="dataset folder not found"):
        load_beir(tmp_path / "nope")
    folder = write_dataset(tmp_path / "d")
    (folder / "queries.jsonl").unlink()
    with pytest.raises(NotFoundError, match=r"queries\.jsonl: missing"):
        load_beir(folder)


@pytest.mark.parametrize(
    ("files", "pattern"),
    [
        ({"corpus": '{"_id": "a", "text": "x"}\n{oops\n'}, r"corpus\.jsonl line 2: not valid JSON"),
        ({"corpus": '{"title": "t", "text": "x"}\n'}, r"corpus\.jsonl line 1: missing '_id'"),
        ({"corpus": '["a"]\n'}, r"corpus\.jsonl line 1: expected a JSON object"),
        (
            {"corpus": '{"_id": "a", "text": "x"}\n{"_id": "a", "text": "y"}\n'},
            r"corpus\.jsonl line 2: duplicate _id 'a'",
        ),
        (
            {"queries": '{"_id": "q1", "text": 5}\n'},
            r"queries\.jsonl line 1: 'text' must be a string",
        ),
        ({"qrels": "query-id\tcorpus-id\tscore\nq1 a 1\n"}, r"qrels\.tsv line 2: expected 3"),
        ({"qrels": "q1\ta\thigh\n"}, r"qrels\.tsv line 1: score 'high' is not a number"),
        ({"qrels": "q1\ta\t0.5\n"}, r"qrels\.tsv line 1: score '0.5' must be an integer"),
        ({"qrels": "query-id\tcorpus-id\tscore\n"}, r"qrels\.tsv: no judgements"),
        ({"qrels": "q1\ta\t0\n"}, "no query .* has a positive judgement"),
    ],
)
def test_malformed_files_are_config_errors(
    tmp_path: Path, files: dict[str, str], pattern: str
) -> None:
    folder = write_dataset(tmp_path / "bad", **files)
    with pytest.raises(ConfigError, match=pattern) as info:
        load_beir(folder)
    assert isinstance(info.value, ClawkbError)


# --- the runner, end to end through a real throw-away knowledge base ---------


def test_runner_rejects_bad_arguments(tmp_path: Path) -> None:
    folder = write_dataset(tmp_path / "tiny")
    with pytest.raises(ConfigError, match="k values"):
        evaluate_dataset(folder, k_values=(0, 10))
    with pytest.raises(ConfigError, match="limit_queries"):
        evaluate_dataset(folder, limit_queries=0)


def test_runner_known_answer_on_tiny_dataset(tmp_path: Path) -> None:
    report = evaluate_dataset(write_dataset(tmp_path / "tiny"), k_values=(1, 10))
    assert report.dataset == "tiny"
    assert report.doc_count == 2
    assert [q.query_id for q in report.queries] == ["q1"]
    (row,) = report.queries
    assert row.top_ids[0] == "a"
    assert row.first_relevant_rank == 1
    assert report.metrics["ndcg@1"] == 1.0
    assert report.metrics["mrr@10"] == 1.0


def test_runner_on_cmrc_slice_keeps_the_kb(tmp_path: Path) -> None:
    home = tmp_path / "kb"
    report = evaluate_dataset(MINI / "cmrc2018-dev", limit_queries=10, kb_home=home)
    assert home.exists()
    assert report.doc_count == 200
    assert report.chunk_count >= 200  # every paragraph yields at least one chunk
    assert len(report.queries) == 10
    # Plain BM25 scores nDCG@10 ~0.93 here: these questions copy their paragraph's words.
    assert report.metrics["ndcg@10"] >= 0.7
    assert report.metrics["recall@100"] >= 0.9
    assert 0 < report.latency_p50_ms <= report.latency_p95_ms
    assert report.index_seconds > 0
    for row in report.queries:
        assert len(set(row.top_ids)) == len(row.top_ids)  # one entry per document
    data = json.loads(json.dumps(report.to_dict(), ensure_ascii=False))
    assert data["query_count"] == 10
    assert set(data["queries"][0]) >= {"query_id", "latency_ms", "metrics", "top_ids"}


def test_runner_on_cranfield_slice() -> None:
    report = evaluate_dataset(MINI / "cranfield")
    assert len(report.queries) == 20
    # Plain BM25 scores nDCG@10 ~0.62 / Recall@100 ~0.96 on this 200-doc slice.
    assert report.metrics["ndcg@10"] >= 0.4
    assert report.metrics["recall@100"] >= 0.8


def test_eval_command_text_and_json() -> None:
    runner = CliRunner()
    text = runner.invoke(eval_cmd, [str(MINI / "cmrc2018-dev"), "--limit-queries", "5"])
    assert text.exit_code == 0, text.output
    for label in ("dataset     cmrc2018-dev", "docs        200", "ndcg@10", "recall@100", "p95"):
        assert label in text.output
    as_json = runner.invoke(eval_cmd, [str(MINI / "cranfield"), "--limit-queries", "3", "--json"])
    assert as_json.exit_code == 0, as_json.output
    data = json.loads(as_json.output)
    assert data["dataset"] == "cranfield" and len(data["queries"]) == 3
    missing = runner.invoke(eval_cmd, ["/nonexistent/dataset"])
    assert missing.exit_code == 2
    assert "dataset folder not found" in missing.output


def test_beir_download_layout_with_qrels_folder(tmp_path: Path) -> None:
    """BEIR's own downloads keep the judgements in qrels/test.tsv (and dev/train beside it)."""
    folder = write_dataset(tmp_path / "scifact")
    (folder / "qrels").mkdir()
    (folder / "qrels.tsv").rename(folder / "qrels" / "test.tsv")
    (folder / "qrels" / "train.tsv").write_text("query-id\tcorpus-id\tscore\nq2\tb\t1\n", "utf-8")
    data = load_beir(folder)
    assert [q.id for q in data.queries] == ["q1"]  # the test split only, not train
    res = CliRunner().invoke(eval_cmd, [str(folder), "--json"], obj={})
    assert res.exit_code == 0, res.output
    (folder / "qrels" / "test.tsv").unlink()
    with pytest.raises(NotFoundError, match=r"qrels\.tsv or qrels/test\.tsv"):
        load_beir(folder)
