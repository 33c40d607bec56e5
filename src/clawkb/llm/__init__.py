"""Chat clients behind one tiny interface: any OpenAI-compatible HTTP API.

Ollama (``http://localhost:11434/v1``), the llama.cpp server
(``http://localhost:8080/v1``), vLLM and OpenAI all serve
``POST {base_url}/chat/completions``; that one call (plain or streamed as
server-sent events) is all clawkb needs, so the client is httpx (+ httpx-sse
for the stream) with no SDK. Settings are the ``llm:`` section of the one
settings model (:class:`clawkb.config.LLMSettings`): ``config.yaml`` under
``CLAWKB_LLM_*`` variables::

    llm:
      base_url: http://localhost:11434/v1   # CLAWKB_LLM_BASE_URL
      model: qwen2.5:3b                     # CLAWKB_LLM_MODEL
      api_key_env: OPENAI_API_KEY           # or api_key / CLAWKB_LLM_API_KEY
      timeout_s: 60                         # CLAWKB_LLM_TIMEOUT_S (or CLAWKB_LLM_TIMEOUT)
      retries: 2
      gguf: ~/models/small.gguf             # CLAWKB_LLM_GGUF: in-process llama-cpp
      client: openai                        # or llama-cpp, or a plugin's name

Clients are plugins of the ``clawkb.llm_clients`` entry-point group
(built-ins ``openai`` and ``llama-cpp``). Transient failures (connection
refused, timeouts, HTTP 408/429/5xx) are retried by
:func:`clawkb.endpoint.with_retries`, honouring ``Retry-After``; everything
else fails at once with an :class:`LLMError` naming the endpoint and what to
check. A stream that fails after tokens were shown is not retried (the user
already saw half an answer).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any, Protocol, cast

import httpx

from clawkb.config import Config, LLMSettings
from clawkb.endpoint import (
    Transient,
    is_transient_status,
    retry_after_s,
    transient_from,
    with_retries,
)
from clawkb.errors import ConfigError, LLMError

__all__ = [
    "ChatClient",
    "ChatReply",
    "LLMError",
    "LLMSettings",
    "OpenAIChatClient",
    "load_llm_settings",
    "make_client",
]

Message = Mapping[str, str]
TokenSink = Callable[[str], None]


@dataclass(frozen=True)
class ChatReply:
    text: str
    model: str
    finish_reason: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    attempts: int = 1


class ChatClient(Protocol):
    """What :func:`clawkb.answer.answer` needs from a model: one chat call."""

    name: str

    def chat(self, messages: Sequence[Message], *, on_token: TokenSink | None = None) -> ChatReply:
        """Complete ``messages``; stream text pieces to ``on_token`` when given."""
        ...


def load_llm_settings(config: Config, env: Mapping[str, str] | None = None) -> LLMSettings:
    """The ``llm:`` settings of ``config``, under ``CLAWKB_LLM_*`` variables of ``env``.

    ``env`` defaults to ``os.environ`` (already applied by :meth:`Config.load`;
    applying it again changes nothing). ``api_key_env`` is resolved here.
    """
    env = os.environ if env is None else env
    llm_env = {k: v for k, v in env.items() if k.startswith("CLAWKB_LLM_")}
    settings = config.llm
    if llm_env:
        from clawkb.config.load import build_config

        over = build_config({}, llm_env)
        keys = [f.name for f in fields(LLMSettings) if over.source(f"llm.{f.name}") != "default"]
        settings = replace(settings, **{k: getattr(over.llm, k) for k in keys})
    if settings.api_key_env and not settings.api_key:
        key = env.get(settings.api_key_env)
        if not key:
            raise ConfigError(
                f"llm.api_key_env names ${settings.api_key_env}, which is not set in the environment"
            )
        settings = replace(settings, api_key=key)
    if settings.base_url and not settings.base_url.startswith(("http://", "https://")):
        raise ConfigError(
            f"llm.base_url {settings.base_url!r} must start with http:// or https:// "
            "(e.g. http://localhost:11434/v1)"
        )
    return settings


def make_client(settings: LLMSettings) -> ChatClient | None:
    """The client the settings describe (a ``clawkb.llm_clients`` plugin), or None."""
    from clawkb.plugins import load_plugin

    name = settings.client or (
        "llama-cpp" if settings.gguf else "openai" if settings.base_url else ""
    )
    if not name:
        return None
    # the group's contract: factory(settings) -> ChatClient (docs/plugins.md)
    factory = cast(
        Callable[[LLMSettings], ChatClient],
        load_plugin("clawkb.llm_clients", name, what="LLM client (llm.client)"),
    )
    return factory(settings)


def openai_client(settings: LLMSettings) -> ChatClient:
    return OpenAIChatClient(settings)


def llama_cpp_client(settings: LLMSettings) -> ChatClient:
    from clawkb.llm.local import LlamaCppClient

    return LlamaCppClient(settings)


class OpenAIChatClient:
    """``POST {base_url}/chat/completions``, plain JSON or SSE stream."""

    def __init__(self, settings: LLMSettings) -> None:
        if not settings.base_url:
            raise ConfigError("llm.base_url is not set")
        self.settings = settings
        self.url = settings.base_url.rstrip("/") + "/chat/completions"
        self.name = settings.model or "default"

    def chat(self, messages: Sequence[Message], *, on_token: TokenSink | None = None) -> ChatReply:
        started: list[bool] = []

        def sink(piece: str) -> None:
            started.append(True)
            assert on_token is not None
            on_token(piece)

        def once(_attempt: int) -> ChatReply:
            try:
                return self._once(messages, sink if on_token else None)
            except Transient as exc:
                if started:
                    raise LLMError(f"LLM stream from {self.url} broke off: {exc}") from None
                raise

        try:
            reply, used = with_retries(
                once,
                retries=self.settings.retries,
                backoff_s=self.settings.backoff_s,
                max_wait_s=self.settings.max_retry_after_s,
            )
        except Transient as exc:
            raise LLMError(
                f"LLM endpoint {self.url} failed after {self.settings.retries + 1} attempt(s):"
                f" {exc} (is the server running? check llm.base_url / CLAWKB_LLM_BASE_URL)"
            ) from None
        return ChatReply(reply.text, reply.model, reply.finish_reason, reply.usage, used)

    def _body(self, messages: Sequence[Message], stream: bool) -> dict[str, Any]:
        return {
            "model": self.name,
            "messages": [dict(m) for m in messages],
            "temperature": self.settings.temperature,
            "max_tokens": self.settings.max_tokens,
            "stream": stream,
        }

    def _headers(self, stream: bool) -> dict[str, str]:
        headers = {"Accept": "text/event-stream" if stream else "application/json"}
        if self.settings.api_key:
            headers["Authorization"] = f"Bearer {self.settings.api_key}"
        return headers

    def _once(self, messages: Sequence[Message], on_token: TokenSink | None) -> ChatReply:
        stream = on_token is not None
        timeout = self.settings.timeout_s
        try:
            with httpx.Client(timeout=timeout) as client:
                if not stream:
                    resp = client.post(
                        self.url, json=self._body(messages, False), headers=self._headers(False)
                    )
                    self._check(resp)
                    return self._parse(resp.content)
                with client.stream(
                    "POST", self.url, json=self._body(messages, True), headers=self._headers(True)
                ) as resp:
                    if resp.status_code >= 400:
                        resp.read()
                    self._check(resp)
                    assert on_token is not None
                    return self._stream(resp, on_token)
        except httpx.HTTPError as exc:
            raise transient_from(exc, timeout) from None

    def _check(self, resp: httpx.Response) -> None:
        if resp.status_code < 400:
            return
        detail = _error_detail(resp.content)
        if is_transient_status(resp.status_code):
            raise Transient(
                f"HTTP {resp.status_code} {detail}".strip(), retry_after_s(resp.headers)
            )
        hint = {
            401: " (check the API key: llm.api_key_env or CLAWKB_LLM_API_KEY)",
            403: " (the API key is not allowed to use this model)",
            404: " (check llm.base_url ends in /v1 and llm.model names a model the server has)",
        }.get(resp.status_code, "")
        raise LLMError(f"LLM endpoint {self.url} answered HTTP {resp.status_code}: {detail}{hint}")

    def _parse(self, raw: bytes) -> ChatReply:
        try:
            obj = json.loads(raw)
            choice = obj["choices"][0]
            text = choice["message"].get("content") or ""
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            raise LLMError(
                f"LLM endpoint {self.url} did not return an OpenAI-style chat completion: "
                f"{raw[:200]!r}"
            ) from None
        return ChatReply(
            text, obj.get("model", self.name), choice.get("finish_reason"), obj.get("usage") or {}
        )

    def _stream(self, resp: httpx.Response, on_token: TokenSink) -> ChatReply:
        from httpx_sse import EventSource

        parts: list[str] = []
        model, finish = self.name, None
        try:
            for event in EventSource(resp).iter_sse():
                data = event.data.strip()
                if data == "[DONE]":
                    break
                if not data:
                    continue
                obj = json.loads(data)
                if "error" in obj:
                    raise LLMError(f"LLM endpoint {self.url}: {_error_detail(data.encode())}")
                choice = (obj.get("choices") or [{}])[0]
                model = obj.get("model", model)
                finish = choice.get("finish_reason") or finish
                piece = (choice.get("delta") or {}).get("content")
                if piece:
                    parts.append(piece)
                    on_token(piece)
        except ValueError:
            raise LLMError(f"LLM endpoint {self.url} sent a malformed stream event") from None
        return ChatReply("".join(parts), model, finish)


def _error_detail(raw: bytes) -> str:
    """The ``error.message`` of an OpenAI-style error body, else the raw start."""
    try:
        obj = json.loads(raw)
        err = obj.get("error", obj)
        return str(err.get("message", err) if isinstance(err, dict) else err)[:300]
    except (ValueError, AttributeError):
        return raw[:300].decode("utf-8", "replace")
