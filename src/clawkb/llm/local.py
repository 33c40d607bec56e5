"""In-process local model through llama-cpp-python (extra ``clawkb[llm]``).

Same :class:`~clawkb.llm.ChatClient` interface as the HTTP client, so
``answer()`` does not care where the model runs. Configure with
``llm.gguf: /path/model.gguf`` or ``CLAWKB_LLM_GGUF``. The model is loaded
once per client (loading dominates the first call).

Not exercised by the test suite here: PyPI has llama-cpp-python only as a
source distribution (a C++ build), and no package on PyPI that installs here
ships GGUF weights, while model hubs are not reachable at run time.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from clawkb.errors import ConfigError, MissingDependencyError
from clawkb.llm import ChatReply, LLMError, LLMSettings, Message, TokenSink

__all__ = ["LlamaCppClient"]


class LlamaCppClient:
    """Chat with a GGUF model in this process."""

    def __init__(self, settings: LLMSettings) -> None:
        if not settings.gguf:
            raise ConfigError("llm.gguf is not set")
        path = Path(settings.gguf).expanduser()
        if not path.is_file():
            raise ConfigError(f"llm.gguf: model file {path} does not exist")
        try:
            from llama_cpp import Llama
        except ImportError:
            raise MissingDependencyError("a local GGUF model (llm.gguf)", "llm") from None
        self.settings = settings
        self.name = path.name
        try:
            self._llm: Llama = Llama(model_path=str(path), n_ctx=settings.n_ctx, verbose=False)
        except (ValueError, RuntimeError) as exc:
            raise LLMError(f"{path}: cannot load the GGUF model ({exc})") from exc

    def chat(self, messages: Sequence[Message], *, on_token: TokenSink | None = None) -> ChatReply:
        kwargs = {
            "messages": [dict(m) for m in messages],
            "temperature": self.settings.temperature,
            "max_tokens": self.settings.max_tokens,
        }
        try:
            if on_token is None:
                out = self._llm.create_chat_completion(**kwargs)
                choice = out["choices"][0]
                return ChatReply(
                    choice["message"].get("content") or "",
                    self.name,
                    choice.get("finish_reason"),
                    out.get("usage") or {},
                )
            parts: list[str] = []
            for event in self._llm.create_chat_completion(stream=True, **kwargs):
                piece = event["choices"][0].get("delta", {}).get("content")
                if piece:
                    parts.append(piece)
                    on_token(piece)
            return ChatReply("".join(parts), self.name)
        except (ValueError, RuntimeError) as exc:
            raise LLMError(f"local model {self.name} failed: {exc}") from exc
