"""Built-in embedders resolve without the entry-point scan unless another
distribution registers embedders; then the plugin registry decides (a plugin
may replace a built-in)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.plugin_helpers import install_dist

PROBE = """
import sys
from clawkb.embed.base import get_embedder, other_distributions_register_embedders
e = get_embedder("static")
print(other_distributions_register_embedders(), type(e).__name__, "clawkb.plugins" in sys.modules)
"""

OVERRIDE = """
from clawkb.embed.static import StaticEmbedder


class Replaced(StaticEmbedder):
    pass


def factory(options):
    return Replaced(**options)
"""


def _probe(env: dict[str, str] | None = None) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


def test_builtin_embedder_skips_the_entry_point_scan() -> None:
    assert _probe() == ["False", "StaticEmbedder", "False"]


def test_a_plugin_replacing_a_builtin_still_wins(tmp_path: Path) -> None:
    env = install_dist(
        tmp_path / "site",
        "replacer",
        "1.0",
        {"replacer_mod": OVERRIDE},
        "[clawkb.embedders]\nstatic = replacer_mod:factory\n",
    )
    assert _probe(env) == ["True", "Replaced", "True"]
