"""Chat clients behind one tiny interface: any OpenAI-compatible HTTP API.

Ollama (``http://localhost:11434/v1``), the llama.cpp server
(``http://localhost:8080/v1``), vLLM and OpenAI all serve
``POST {base_url}/chat/completions``; that one call (plain or streamed as
server-sent events) is all clawkb needs, so the client is stdlib ``urllib``
with no SDK. Settings come from the environment over the ``llm:`` section of
the KB's ``config.yaml``::

    llm:
      base_url: http://localhost:11434/v1   # CLAWKB_LLM_BASE_URL
      model: qwen2.5:3b                     # CLAWKB_LLM_MODEL
      api_key_env: OPENAI_API_KEY           # or api_key / CLAWKB_LLM_API_KEY
      timeout_s: 60                         # CLAWKB_LLM_TIMEOUT
      retries: 2
      gguf: ~/models/small.gguf             # CLAWKB_LLM_GGUF: in-process llama-cpp

Transient failures (connection refused, timeouts, HTTP 408/429/5xx) are
retried with exponential backoff; everything else fails at once with an
:class:`LLMError` naming the endpoint and what to check. A stream that fails
after tokens were shown is not retried (the user already saw half an answer).
"""

from __future__ import annotations

import json
import os
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Protocol

from clawkb.config import Config
from clawkb.errors import ClawkbError, ConfigError

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


class LLMError(ClawkbError):
    """The language model endpoint failed or answered something unusable."""


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


@dataclass(frozen=True)
class LLMSettings:
    base_url: str | None = None
    model: str | None = None
    api_key: str | None = None
    api_key_env: str | None = None
    gguf: str | None = None
    timeout_s: float = 60.0
    retries: int = 2
    backoff_s: float = 0.5
    temperature: float = 0.1
    max_tokens: int = 512
    n_ctx: int = 4096

    @property
    def configured(self) -> bool:
        return bool(self.base_url or self.gguf)

    def describe(self) -> str:
        if self.gguf:
            return f"llama-cpp {self.gguf}"
        return f"{self.model or 'default'} @ {self.base_url}" if self.base_url else "none"


_ENV = {
    "base_url": "CLAWKB_LLM_BASE_URL",
    "model": "CLAWKB_LLM_MODEL",
    "api_key": "CLAWKB_LLM_API_KEY",
    "gguf": "CLAWKB_LLM_GGUF",
    "timeout_s": "CLAWKB_LLM_TIMEOUT",
}


def load_llm_settings(config: Config, env: Mapping[str, str] | None = None) -> LLMSettings:
    """Settings from ``config.yaml``'s ``llm:`` section, overridden by CLAWKB_LLM_* variables."""
    env = os.environ if env is None else env
    raw = config.extra.get("llm") or {}
    if not isinstance(raw, dict):
        raise ConfigError("config.yaml: `llm` must be a mapping (base_url, model, ...)")
    known = {f.name: f for f in fields(LLMSettings)}
    values: dict[str, Any] = {}
    for key, value in raw.items():
        if key not in known:
            raise ConfigError(
                f"config.yaml: unknown setting llm.{key} (known: {', '.join(sorted(known))})"
            )
        values[key] = value
    for key, var in _ENV.items():
        if env.get(var):
            values[key] = env[var]
    defaults = LLMSettings()
    for key, value in list(values.items()):
        default = getattr(defaults, key)
        if isinstance(default, int | float) and value is not None:
            try:
                values[key] = type(default)(value)
            except (TypeError, ValueError):
                raise ConfigError(f"llm.{key}: expected a number, got {value!r}") from None
    settings = LLMSettings(**values)
    if settings.api_key_env and not settings.api_key:
        key = env.get(settings.api_key_env)
        if not key:
            raise ConfigError(
                f"llm.api_key_env names ${settings.api_key_env}, which is not set in the environment"
            )
        settings = LLMSettings(**{**values, "api_key": key})
    if settings.base_url and not settings.base_url.startswith(("http://", "https://")):
        raise ConfigError(
            f"llm.base_url {settings.base_url!r} must start with http:// or https:// "
            "(e.g. http://localhost:11434/v1)"
        )
    return settings


def make_client(settings: LLMSettings) -> ChatClient | None:
    """The client the settings describe, or None (extractive answers)."""
    if settings.gguf:
        from clawkb.answer.local import LlamaCppClient

        return LlamaCppClient(settings)
    if settings.base_url:
        return OpenAIChatClient(settings)
    return None


class _Retryable(Exception):
    pass


class OpenAIChatClient:
    """``POST {base_url}/chat/completions``, plain JSON or SSE stream."""

    def __init__(self, settings: LLMSettings) -> None:
        if not settings.base_url:
            raise ConfigError("llm.base_url is not set")
        self.settings = settings
        self.url = settings.base_url.rstrip("/") + "/chat/completions"
        self.name = settings.model or "default"

    def chat(self, messages: Sequence[Message], *, on_token: TokenSink | None = None) -> ChatReply:
        attempts = self.settings.retries + 1
        last = ""
        for attempt in range(1, attempts + 1):
            started: list[bool] = []
            try:
                reply = self._once(messages, on_token, started)
                return ChatReply(reply.text, reply.model, reply.finish_reason, reply.usage, attempt)
            except _Retryable as exc:
                last = str(exc)
                if started:
                    raise LLMError(f"LLM stream from {self.url} broke off: {last}") from None
                if attempt < attempts:
                    time.sleep(self.settings.backoff_s * 2 ** (attempt - 1))
        raise LLMError(
            f"LLM endpoint {self.url} failed after {attempts} attempt(s): {last}"
            " (is the server running? check llm.base_url / CLAWKB_LLM_BASE_URL)"
        )

    def _request(self, messages: Sequence[Message], stream: bool) -> urllib.request.Request:
        body = {
            "model": self.name,
            "messages": [dict(m) for m in messages],
            "temperature": self.settings.temperature,
            "max_tokens": self.settings.max_tokens,
            "stream": stream,
        }
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if stream:
            headers["Accept"] = "text/event-stream"
        if self.settings.api_key:
            headers["Authorization"] = f"Bearer {self.settings.api_key}"
        data = json.dumps(body, ensure_ascii=False).encode()
        return urllib.request.Request(self.url, data=data, headers=headers, method="POST")

    def _once(
        self, messages: Sequence[Message], on_token: TokenSink | None, started: list[bool]
    ) -> ChatReply:
        req = self._request(messages, stream=on_token is not None)
        try:
            with urllib.request.urlopen(req, timeout=self.settings.timeout_s) as resp:
                if on_token is None:
                    return self._parse(resp.read())
                return self._stream(resp, on_token, started)
        except urllib.error.HTTPError as exc:
            self._http_error(exc)
        except TimeoutError:
            raise _Retryable(f"no response within {self.settings.timeout_s:g}s") from None
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, TimeoutError | socket.timeout):
                raise _Retryable(f"no response within {self.settings.timeout_s:g}s") from None
            raise _Retryable(f"cannot connect ({exc.reason})") from None
        except (ConnectionError, OSError) as exc:
            raise _Retryable(f"connection failed ({exc})") from None
        raise AssertionError("unreachable")

    def _http_error(self, exc: urllib.error.HTTPError) -> None:
        detail = _error_detail(exc.read())
        if exc.code in (408, 429) or exc.code >= 500:
            raise _Retryable(f"HTTP {exc.code} {detail}".strip())
        hint = {
            401: " (check the API key: llm.api_key_env or CLAWKB_LLM_API_KEY)",
            403: " (the API key is not allowed to use this model)",
            404: " (check llm.base_url ends in /v1 and llm.model names a model the server has)",
        }.get(exc.code, "")
        raise LLMError(f"LLM endpoint {self.url} answered HTTP {exc.code}: {detail}{hint}")

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

    def _stream(self, resp: Any, on_token: TokenSink, started: list[bool]) -> ChatReply:
        parts: list[str] = []
        model, finish = self.name, None
        try:
            for raw in resp:
                line = raw.decode("utf-8", "replace").strip()
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    break
                obj = json.loads(data)
                if "error" in obj:
                    raise LLMError(f"LLM endpoint {self.url}: {_error_detail(data.encode())}")
                choice = (obj.get("choices") or [{}])[0]
                model = obj.get("model", model)
                finish = choice.get("finish_reason") or finish
                piece = (choice.get("delta") or {}).get("content")
                if piece:
                    started.append(True)
                    parts.append(piece)
                    on_token(piece)
        except ValueError:
            raise LLMError(f"LLM endpoint {self.url} sent a malformed stream event") from None
        except TimeoutError:
            raise _Retryable(f"stream stalled for {self.settings.timeout_s:g}s") from None
        return ChatReply("".join(parts), model, finish)


def _error_detail(raw: bytes) -> str:
    """The ``error.message`` of an OpenAI-style error body, else the raw start."""
    try:
        obj = json.loads(raw)
        err = obj.get("error", obj)
        return str(err.get("message", err) if isinstance(err, dict) else err)[:300]
    except (ValueError, AttributeError):
        return raw[:300].decode("utf-8", "replace")
