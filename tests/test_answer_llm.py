"""The OpenAI-compatible client against a real HTTP server on loopback."""

from __future__ import annotations

import time

import pytest

from clawkb.config import Config
from clawkb.errors import ConfigError, MissingDependencyError
from clawkb.llm import LLMError, LLMSettings, OpenAIChatClient, load_llm_settings
from llm_server import deterministic_answer, running_server

CONTEXT = (
    '<passage n="1" source="a.md:1-2">\nThe LED is on PA5.\n</passage>\n\n'
    '<passage n="2" source="b.md:3-4">\nThe console runs at 1500000 baud.\n</passage>\n\n'
    "Question: What baud rate does the console use?"
)
MESSAGES = [{"role": "system", "content": "cite"}, {"role": "user", "content": CONTEXT}]


@pytest.fixture(scope="module")
def server():  # type: ignore[no-untyped-def]
    with running_server(flaky_failures=2, slow_s=1.5) as srv:
        yield srv


def client(server, model: str, **kw: object) -> OpenAIChatClient:  # type: ignore[no-untyped-def]
    opts = {"retries": 2, "backoff_s": 0.01, "timeout_s": 5.0, **kw}
    return OpenAIChatClient(LLMSettings(base_url=server.base_url, model=model, **opts))  # type: ignore[arg-type]


def test_fake_answers_from_the_context() -> None:
    assert deterministic_answer(CONTEXT) == "The console runs at 1500000 baud. [2]"


def test_plain_completion(server) -> None:  # type: ignore[no-untyped-def]
    reply = client(server, "echo", api_key="k1").chat(MESSAGES)
    assert reply.text == "The console runs at 1500000 baud. [2]"
    assert reply.finish_reason == "stop" and reply.attempts == 1
    sent = server.requests[-1]
    assert sent["headers"]["Authorization"] == "Bearer k1"
    assert sent["body"]["messages"][1]["content"] == CONTEXT and sent["body"]["stream"] is False


def test_streaming_delivers_pieces_in_order(server) -> None:  # type: ignore[no-untyped-def]
    pieces: list[str] = []
    reply = client(server, "echo").chat(MESSAGES, on_token=pieces.append)
    assert len(pieces) > 3
    assert "".join(pieces) == reply.text == "The console runs at 1500000 baud. [2]"
    assert server.requests[-1]["body"]["stream"] is True


def test_transient_errors_are_retried(server) -> None:  # type: ignore[no-untyped-def]
    reply = client(server, "flaky").chat(MESSAGES)
    assert reply.attempts == 3 and "[2]" in reply.text


def test_persistent_server_error_fails_clearly(server) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(LLMError, match=r"failed after 3 attempt\(s\): HTTP 500 the model crashed"):
        client(server, "fail-500").chat(MESSAGES)


def test_timeout_fails_clearly(server) -> None:  # type: ignore[no-untyped-def]
    t0 = time.perf_counter()
    with pytest.raises(LLMError, match=r"no response within 0.2s"):
        client(server, "slow", timeout_s=0.2, retries=1).chat(MESSAGES)
    assert time.perf_counter() - t0 < 1.4


def test_unauthorized_is_not_retried_and_names_the_key(server) -> None:  # type: ignore[no-untyped-def]
    n = len(server.requests)
    with pytest.raises(LLMError, match=r"HTTP 401: invalid api key \(check the API key"):
        client(server, "auth").chat(MESSAGES)
    assert len(server.requests) == n + 1
    assert client(server, "auth", api_key="sekrit").chat(MESSAGES).text.endswith("[2]")


def test_non_openai_body_is_an_error(server) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(LLMError, match="did not return an OpenAI-style chat completion"):
        client(server, "garbage").chat(MESSAGES)


def test_wrong_path_404_hint(server) -> None:  # type: ignore[no-untyped-def]
    c = OpenAIChatClient(LLMSettings(base_url=server.base_url[:-3] + "/nope", retries=0))
    with pytest.raises(LLMError, match=r"HTTP 404.*ends in /v1"):
        c.chat(MESSAGES)


def test_connection_refused_fails_after_retries() -> None:
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    c = OpenAIChatClient(
        LLMSettings(base_url=f"http://127.0.0.1:{port}/v1", retries=1, backoff_s=0.01)
    )
    with pytest.raises(LLMError, match=r"after 2 attempt\(s\): cannot connect"):
        c.chat(MESSAGES)


def test_settings_env_overrides_config() -> None:
    cfg = Config.from_dict({"llm": {"base_url": "http://h:1/v1", "model": "m", "retries": 4}})
    s = load_llm_settings(cfg, env={"CLAWKB_LLM_MODEL": "other", "CLAWKB_LLM_TIMEOUT": "7"})
    assert (s.base_url, s.model, s.retries, s.timeout_s) == ("http://h:1/v1", "other", 4, 7.0)
    assert load_llm_settings(Config(), env={}).configured is False
    s = load_llm_settings(
        Config.from_dict({"llm": {"base_url": "http://h/v1", "api_key_env": "MY_KEY"}}),
        env={"MY_KEY": "abc"},
    )
    assert s.api_key == "abc"


@pytest.mark.parametrize(
    ("llm", "env", "message"),
    [
        ({"base_url": "localhost:11434"}, {}, "must start with http://"),
        ({"modle": "x"}, {}, r"unknown key 'llm.modle' \(did you mean 'llm.model'\?\)"),
        ({"retries": "many"}, {}, "'llm.retries': Input should be a valid integer"),
        ({"base_url": "http://h/v1", "api_key_env": "NOPE"}, {}, r"\$NOPE, which is not set"),
        ("http://h/v1", {}, "'llm' must be a mapping"),
    ],
)
def test_bad_settings_are_clear_errors(llm: object, env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_llm_settings(Config.from_dict({"llm": llm}), env=env)


def test_local_gguf_needs_a_file_and_the_extra(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from clawkb.llm import make_client

    with pytest.raises(ConfigError, match="does not exist"):
        make_client(LLMSettings(gguf=str(tmp_path / "missing.gguf")))
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        with pytest.raises(MissingDependencyError, match=r"clawkb\[llm\]"):
            make_client(LLMSettings(gguf=str(model)))
