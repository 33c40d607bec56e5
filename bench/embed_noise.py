"""nDCG@10 of a shared set re-embedded with a rounding-level change (one-off, issue 24).

    OMP_NUM_THREADS=1 nice -n 10 .venv/bin/python bench/embed_noise.py cranfield eps1e-6 \\
        --beir-cache DIR

``base`` scores a private copy of the cached, embedded KB as it is; ``epsX``
re-embeds every passage (and section title) of a copy with the shipped int8
session fed the input embeddings scaled by ``1 + X``; ``mha`` re-embeds with the
unmasked ``MultiHeadAttention`` graph for one-window batches (510-token windows).
Both sides use the same query vectors; dense and auto (default) mode, scored by
``engdocs.score_beir``. Results go to ``results/embed-noise.json`` (one key per
set and variant). Kept in git history only: each re-embed of cranfield costs
~150 CPU-s.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import engdocs  # noqa: E402
from shared_data import add_datasets_flag, datasets_dir  # noqa: E402


class _Scaled:
    def __init__(self, session: Any, eps: float) -> None:
        self.session, self.eps = session, eps

    def run(self, names: list[str], feed: dict[str, Any]) -> Any:
        import numpy as np

        return self.session.run(names, {**feed, "x": feed["x"] * np.float32(1 + self.eps)})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_datasets_flag(ap)
    ap.add_argument("name")
    ap.add_argument("variant", help="base, epsX (e.g. eps1e-6) or mha")
    ap.add_argument("--beir-cache", type=Path, required=True)
    ap.add_argument("--work", type=Path, default=HERE / ".cache" / "embed-noise")
    args = ap.parse_args()
    from clawkb.embed.e5 import E5Small
    from clawkb.embed.run import reembed_kb
    from clawkb.kb import KnowledgeBase

    engdocs.QVEC = args.work / "qvec"
    engdocs.QVEC.mkdir(parents=True, exist_ok=True)
    work = args.work / args.variant
    done = work / args.name / "REEMBEDDED"
    note = ""
    if args.variant != "base" and not done.exists():
        dst = engdocs.working_copy(args.beir_cache / args.name, work, fresh=True)
        emb = E5Small()
        if args.variant.startswith("eps"):
            emb._session = _Scaled(emb.session, float(args.variant[3:]))  # type: ignore[assignment]
        elif args.variant == "mha":
            plain = emb._forward
            emb._forward = lambda seqs, session=None: plain(  # type: ignore[method-assign]
                seqs, emb.unmasked if len(seqs) == 1 else session
            )
        else:
            raise SystemExit(f"embed_noise: unknown variant {args.variant!r}")
        cpu = time.process_time()
        with KnowledgeBase.open(dst) as kb:
            reembed_kb(kb, embedder=emb)
        note = f"re-embedded in {time.process_time() - cpu:.0f} CPU-s"
        done.write_text(note + "\n")
    scores = engdocs.score_beir(
        args.beir_cache, work, datasets_dir(args.datasets), args.name, ("dense", "auto"), 500, False
    )
    out = HERE / "results" / "embed-noise.json"
    doc = json.loads(out.read_text()) if out.exists() else {}
    doc[f"{args.name}/{args.variant}"] = {"note": note, **scores}
    out.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
