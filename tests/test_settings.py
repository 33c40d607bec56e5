"""The one settings model: strict keys in config.yaml and CLAWKB_* variables, sources shown."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from clawkb.cli.main import cli
from clawkb.config import Config
from clawkb.config.load import env_names
from clawkb.errors import ConfigError
from clawkb.ingest.chunker import ChunkConfig
from clawkb.kb import KnowledgeBase
from clawkb.memory.model import Weighting
from clawkb.retrieve.settings import RetrievalSettings


def _home(tmp_path: Path, yaml_text: str) -> Path:
    home = tmp_path / "kb"
    home.mkdir(exist_ok=True)
    (home / "config.yaml").write_text(yaml_text, encoding="utf-8")
    return home


def test_misspelt_top_level_key_names_file_and_closest_key(tmp_path: Path) -> None:
    home = _home(tmp_path, "max_token: 5\n")
    with pytest.raises(ConfigError) as err:
        KnowledgeBase.open(home, create=True)
    assert str(err.value) == (
        f"{home / 'config.yaml'}: unknown key 'max_token' (did you mean 'max_tokens'?)"
    )


@pytest.mark.parametrize(
    ("yaml_text", "wanted"),
    [
        ("retrieval:\n  w_dens: 0\n", "'retrieval.w_dens' (did you mean 'retrieval.w_dense'?)"),
        ("embedding:\n  modle: static\n", "'embedding.modle' (did you mean 'embedding.model'?)"),
        ("llm:\n  base_ur: http://h/v1\n", "'llm.base_ur' (did you mean 'llm.base_url'?)"),
        ("answer:\n  context_token: 900\n", "(did you mean 'answer.context_tokens'?)"),
        ("memory:\n  half_life: 3\n", "(did you mean 'memory.half_life_days'?)"),
        ("board_bost: 2\n", "'board_bost' (did you mean 'board_boost'?)"),
        ("datasheet: ds\n", "(did you mean 'datasheets'?)"),
        ("follow_symlink: outside\n", "(did you mean 'follow_symlinks'?)"),
    ],
)
def test_every_section_is_strict(tmp_path: Path, yaml_text: str, wanted: str) -> None:
    home = _home(tmp_path, yaml_text)
    with pytest.raises(ConfigError, match="unknown key") as err:
        Config.load(home, env={})
    assert str(err.value).startswith(f"{home / 'config.yaml'}: ")
    assert wanted in str(err.value)


@pytest.mark.parametrize(
    ("yaml_text", "wanted"),
    [
        ("overlap: 0.7\n", "'overlap': Input should be less than 0.5"),
        ("retrieval:\n  mode: fast\n", "retrieval mode must be one of auto, lexical"),
        ("retrieval:\n  rrf_k: many\n", "'retrieval.rrf_k': Input should be a valid integer"),
        (
            "follow_symlinks: always\n",
            "'follow_symlinks': Input should be 'inside', 'outside' or 'never'",
        ),
        ("board_boost: 0\n", "'board_boost': Input should be greater than 0"),
        ("llm: http://h/v1\n", "'llm' must be a mapping of settings, got a string"),
        ("- a\n- b\n", "expected a mapping of settings, got a list"),
    ],
)
def test_bad_values_are_one_clear_line(tmp_path: Path, yaml_text: str, wanted: str) -> None:
    home = _home(tmp_path, yaml_text)
    with pytest.raises(ConfigError, match=r"config\.yaml") as err:
        Config.load(home, env={})
    assert wanted in str(err.value) and "\n" not in str(err.value)


def test_valid_file_is_read_into_typed_sections(tmp_path: Path) -> None:
    home = _home(
        tmp_path,
        "max_tokens: 200\nfollow_symlinks: outside\nembedding: static\n"
        "retrieval:\n  rrf_k: 30\n  rerank_options: {base_url: 'http://h'}\n"
        "datasheets: ds\nmemory: {half_life_days: 7}\n",
    )
    cfg = Config.load(home, env={})
    assert (cfg.max_tokens, cfg.follow_symlinks, cfg.embedding.model) == (200, "outside", "static")
    assert cfg.retrieval.rrf_k == 30 and cfg.datasheets == ("ds",)
    assert cfg.explicit("retrieval") == {"rrf_k": 30, "rerank_options": {"base_url": "http://h"}}
    assert cfg.memory.half_life_days == 7.0


def test_environment_overrides_file_and_is_strict_too(tmp_path: Path) -> None:
    home = _home(tmp_path, "max_tokens: 200\nretrieval:\n  rrf_k: 30\n")
    env = {
        "CLAWKB_MAX_TOKENS": "120",
        "CLAWKB_RETRIEVAL_MODE": "lexical",
        "CLAWKB_IGNORE": "*.log, build/",
        "CLAWKB_EMBEDDING_OPTIONS": "{delay: 0}",
        "CLAWKB_LLM_TIMEOUT": "7",  # the older spelling of CLAWKB_LLM_TIMEOUT_S
        "CLAWKB_HOME": "/elsewhere",  # not a setting: ignored here
        "PATH": "/bin",
    }
    cfg = Config.load(home, env=env)
    assert cfg.max_tokens == 120 and cfg.retrieval.rrf_k == 30
    assert cfg.retrieval.mode == "lexical" and cfg.ignore == ("*.log", "build/")
    assert cfg.embedding.options == {"delay": 0} and cfg.llm.timeout_s == 7.0
    assert cfg.source("max_tokens") == "env CLAWKB_MAX_TOKENS"
    assert cfg.source("retrieval.rrf_k") == "config.yaml"
    assert cfg.source("k1") == "default"
    with pytest.raises(ConfigError) as err:
        Config.load(home, env={"CLAWKB_MAX_TOKEN": "5"})
    assert str(err.value) == (
        "environment: unknown variable CLAWKB_MAX_TOKEN (did you mean CLAWKB_MAX_TOKENS?)"
    )
    with pytest.raises(ConfigError, match="environment: CLAWKB_K1: Input should be a valid"):
        Config.load(home, env={"CLAWKB_K1": "high"})


def test_every_key_has_an_environment_variable() -> None:
    names = env_names()
    assert names["CLAWKB_LLM_BASE_URL"] == "llm.base_url"
    assert names["CLAWKB_FOLLOW_SYMLINKS"] == "follow_symlinks"
    assert names["CLAWKB_RETRIEVAL_W_DENSE"] == "retrieval.w_dense"
    assert len(set(names.values())) == len(names) - 1  # one alias (CLAWKB_LLM_TIMEOUT)


def test_model_defaults_are_the_runtime_defaults() -> None:
    cfg = Config()
    chunk = ChunkConfig()
    assert (cfg.max_tokens, cfg.overlap) == (chunk.max_tokens, chunk.overlap)
    runtime = RetrievalSettings()
    for name in (f.name for f in dataclasses.fields(cfg.retrieval)):
        if name != "rerank_options":
            assert getattr(cfg.retrieval, name) == getattr(runtime, name), name
    assert (cfg.memory.half_life_days, cfg.memory.recency_floor) == (
        Weighting().half_life_days,
        Weighting().recency_floor,
    )


def test_config_command_shows_values_and_sources(tmp_path: Path) -> None:
    home = _home(tmp_path, "max_tokens: 200\nllm:\n  api_key: sekrit\n")
    runner = CliRunner()
    res = runner.invoke(
        cli, ["--kb", str(home), "config", "--json"], env={"CLAWKB_RETRIEVAL_RRF_K": "33"}
    )
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    rows = {r["key"]: r for r in data["settings"]}
    assert rows["max_tokens"] == {"key": "max_tokens", "value": 200, "source": "config.yaml"}
    assert rows["retrieval.rrf_k"]["source"] == "env CLAWKB_RETRIEVAL_RRF_K"
    assert rows["retrieval.rrf_k"]["value"] == 33
    assert rows["overlap"]["source"] == "default"
    assert rows["llm.api_key"]["value"] == "***"  # never printed
    assert data["knowledge_base"] == str(home)
    text = runner.invoke(cli, ["--kb", str(home), "config"]).stdout
    line = next(ln for ln in text.splitlines() if ln.startswith("max_tokens "))
    assert line.split() == ["max_tokens", "200", "config.yaml"]
    assert "sekrit" not in text


def test_config_command_reports_a_bad_file(tmp_path: Path) -> None:
    home = _home(tmp_path, "max_token: 5\n")
    res = CliRunner().invoke(cli, ["--kb", str(home), "config"])
    assert res.exit_code == 2
    assert "config.yaml: unknown key 'max_token' (did you mean 'max_tokens'?)" in res.output


def test_docs_name_every_key() -> None:
    from clawkb.config.load import effective

    docs = (Path(__file__).parents[1] / "docs" / "config.md").read_text(encoding="utf-8")
    for key, _value, _source in effective(Config()):
        assert f"`{key.rpartition('.')[2]}`" in docs, key


def test_no_file_no_variables_needs_no_validation_library(tmp_path: Path) -> None:
    """Opening a KB without config.yaml stays cheap: pydantic is not even imported."""
    import subprocess
    import sys

    code = (
        "import sys; from pathlib import Path; from clawkb.config import Config; "
        f"c = Config.load(Path({str(tmp_path)!r}), env={{'CLAWKB_HOME': 'x'}}); "
        "assert c == Config(); print('pydantic' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
