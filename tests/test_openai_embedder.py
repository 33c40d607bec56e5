"""The OpenAI-compatible embedder against a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import numpy as np
import pytest

from clawkb.embed.base import get_embedder
from clawkb.embed.openai import EndpointError
from clawkb.errors import ConfigError
from dense_helpers import embedding_server


def test_openai_embedder_batches_and_orders_by_index(monkeypatch):
    monkeypatch.setenv("TEST_KEY", "sekret")
    with embedding_server() as (url, state):
        emb = get_embedder(
            "openai",
            {"base_url": url, "model": "m1", "batch_size": 2, "api_key_env": "TEST_KEY"},
        )
        texts = ["alpha beta", "gamma delta", "epsilon", "DDR 走线"]
        vecs = emb.embed_documents(texts)
        assert vecs.shape == (4, 64)
        direct = get_embedder("static").embed_documents(texts)
        assert np.allclose(vecs, direct, atol=1e-5)  # row i is text i despite reversed answers
        assert [len(r["body"]["input"]) for r in state.requests] == [2, 2]
        assert state.requests[0]["body"]["model"] == "m1"
        assert state.requests[0]["auth"] == "Bearer sekret"
        assert emb.dim == 64
        assert emb.signature()["model"] == "openai:m1"


def test_openai_embedder_retries_server_errors_then_fails_clearly():
    with embedding_server() as (url, state):
        emb = get_embedder("openai", {"base_url": url, "dim": 64})
        state.fail_next = [503]
        assert emb.embed_query("hello").shape == (64,)  # retried after one 503
        state.fail_next = [400]
        with pytest.raises(EndpointError, match=r"/v1/embeddings: request failed \(HTTP 400"):
            emb.embed_query("hello")


def test_openai_embedder_dim_mismatch_and_bad_url():
    with embedding_server() as (url, _):
        emb = get_embedder("openai", {"base_url": url, "dim": 128})
        with pytest.raises(EndpointError, match="returned 64-d vectors, configured dim is 128"):
            emb.embed_query("x")
    with pytest.raises(ConfigError, match="must start with http"):
        get_embedder("openai", {"base_url": "localhost:11434"})


def test_openai_embedder_unreachable_endpoint():
    emb = get_embedder("openai", {"base_url": "http://127.0.0.1:9/v1", "dim": 8, "timeout": 1})
    with pytest.raises(EndpointError, match=r"127.0.0.1:9/v1/embeddings: request failed"):
        emb.embed_query("x")


def test_openai_embedder_sends_several_queries_in_one_request():
    with embedding_server() as (url, state):
        emb = get_embedder("openai", {"base_url": url, "model": "m1", "dim": 64})
        texts = ["串口没有输出怎么办", "serial port no output"]
        vecs = emb.embed_queries(texts)
        assert vecs.shape == (2, 64)
        assert len(state.requests) == 1
        sent = state.requests[0]["body"]["input"]
        assert sent == [emb.query_prefix + t for t in texts]
        for row, text in zip(vecs, texts, strict=True):
            assert np.allclose(row, emb.embed_query(text), atol=1e-6)
