"""A generated third-party documentation tree, shaped like a Rust project's mdBook.

Used by ``tests/test_newcomer.py``
(the scripted first-hour walk-through). Deterministic for a given seed: 200
Markdown chapters (about one in five in Chinese, with full-width punctuation),
headings, lists, pipe tables, fenced code, links, mdBook template syntax
(``{{#include …}}``) and stray HTML, plus the things a book's repository also
holds: ``book.toml``, a ``SUMMARY.md`` and a ``theme/`` folder with a minified
``*.min.js`` and ``*.min.css`` that must never end up in the index.
"""

from __future__ import annotations

import random
from pathlib import Path

TOPICS_EN = [
    ("scheduler", "cron jobs", "Configure the scheduler with a cron expression per job."),
    ("gateway", "API tokens", "The gateway checks the bearer token on every request."),
    ("memory", "storage backend", "Memory entries are stored in SQLite or in a remote store."),
    ("sandbox", "Linux backends", "On Linux the sandbox uses bubblewrap or a container runtime."),
    ("plugins", "entry points", "Plugins register themselves through Python entry points."),
    ("logging", "log rotation", "Logs rotate daily and keep seven files by default."),
    ("network", "proxy settings", "Set HTTPS_PROXY to route outgoing requests through a proxy."),
    ("storage", "snapshots", "Snapshots are taken every hour and pruned after a week."),
]
TOPICS_ZH = [
    ("定时任务", "定时任务配置", "使用 cron 表达式配置每个定时任务：例如每天凌晨两点运行。"),
    ("网关", "认证令牌", "网关在每个请求上校验令牌（Bearer Token），过期后返回 401。"),
    ("记忆", "存储后端", "记忆条目保存在 SQLite 中，也可以配置远程存储后端。"),
    ("沙箱", "隔离机制", "在 Linux 上，沙箱使用 bubblewrap 或容器运行时进行隔离。"),
    ("阻抗", "阻抗匹配", "差分线阻抗：90 欧姆，误差不超过 10%；走线需等长。"),
]

#: Identifiers the newcomer test searches for; each appears in exactly one chapter.
MARKERS = {
    "en": "FROBNICATE_TIMEOUT_MS",
    "zh": "量子隧穿校准",
}

MIN_JS_LINE = "!function(e,t){" + ";".join(f"var a{i}=e[{i}]||t" for i in range(400)) + "}();\n"
MIN_CSS_LINE = "".join(f".c{i}{{margin:{i}px;padding:0}}" for i in range(400)) + "\n"


def _chapter_en(rng: random.Random, n: int) -> str:
    slug, topic, sentence = TOPICS_EN[n % len(TOPICS_EN)]
    rows = "\n".join(
        f"| `{slug}.option{k}` | {rng.randint(1, 500)} | Controls {topic} detail {k}. |"
        for k in range(rng.randint(3, 8))
    )
    return f"""# Chapter {n}: {slug.title()} {topic}

{{{{#include ../snippets/header.md}}}}

{sentence} This chapter explains {topic} for the {slug} module, with
examples and the options that matter. See [the overview](../intro.md) and
<a href="#details">details</a> for background.

## Options

| Option | Default | Meaning |
|--------|---------|---------|
{rows}

## Example

```rust
fn main() {{
    let cfg = {slug}::Config::default();
    println!("{{:?}}", cfg);
}}
```

- Step one: enable the {slug} module.
- Step two: restart the service.
- Step three: check the logs for `{slug} ready`.

<div class="warning">
Changing {topic} at run time needs a restart.
</div>
"""


def _chapter_zh(rng: random.Random, n: int) -> str:
    slug, topic, sentence = TOPICS_ZH[n // 5 % len(TOPICS_ZH)]
    return f"""# 第{n}章 {slug}：{topic}

{sentence}本章说明{topic}的用法，并给出常见问题的解决办法。

## 参数

| 参数 | 默认值 | 说明 |
|------|--------|------|
| 超时 | {rng.randint(1, 60)} 秒 | 超过该时间后重试（最多三次）。 |
| 重试 | 3 次 | 失败后按指数退避重试。 |

## 注意事项

- 修改{topic}后需要重启服务。
- 日志中出现“{slug} 就绪”表示启动成功。
"""


def write_tree(root: Path, n_files: int = 200, seed: int = 13) -> Path:
    """Write the book under ``root`` (created) and return ``root``."""
    rng = random.Random(seed)
    src = root / "src"
    (src / "snippets").mkdir(parents=True, exist_ok=True)
    (root / "theme" / "js").mkdir(parents=True, exist_ok=True)
    (root / "theme" / "css").mkdir(parents=True, exist_ok=True)
    (root / "book.toml").write_text(
        '[book]\ntitle = "Frobnicator Book"\nauthors = ["Someone"]\nlanguage = "en"\n\n'
        '[output.html]\ndefault-theme = "light"\n',
        encoding="utf-8",
    )
    (root / "theme" / "js" / "book.min.js").write_text(MIN_JS_LINE * 3, encoding="utf-8")
    (root / "theme" / "css" / "chrome.min.css").write_text(MIN_CSS_LINE, encoding="utf-8")
    (root / "theme" / "index.hbs").write_text(
        "<!DOCTYPE html>\n<html><head><title>{{ title }}</title></head>\n"
        "<body>{{{ content }}}</body></html>\n",
        encoding="utf-8",
    )
    (src / "snippets" / "header.md").write_text("> Generated with mdBook.\n", encoding="utf-8")
    (src / "intro.md").write_text(
        "# Introduction\n\nThe frobnicator book explains every module.\n", encoding="utf-8"
    )
    summary = ["# Summary", "", "- [Introduction](intro.md)"]
    for n in range(1, n_files - 2):  # plus intro, SUMMARY and a snippet
        zh = n % 5 == 0
        text = _chapter_zh(rng, n) if zh else _chapter_en(rng, n)
        if n == 42:
            text += f"\n## Limits\n\nThe {MARKERS['en']} option caps one frobnication.\n"
        if n == 45:
            text += f"\n## 校准\n\n{MARKERS['zh']}：每次上电后运行一次，耗时约 3 秒。\n"
        name = f"ch{n:03d}.md"
        (src / name).write_text(text, encoding="utf-8")
        summary.append(f"- [Chapter {n}]({name})")
    (src / "SUMMARY.md").write_text("\n".join(summary) + "\n", encoding="utf-8")
    return root
