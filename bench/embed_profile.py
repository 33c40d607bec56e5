"""Where e5-small's CPU time goes on real chunks, and how fragile its int8 vectors are.

    OMP_NUM_THREADS=1 nice -n 10 .venv/bin/python bench/embed_profile.py [--chunks 60]

Three measurements, one inference thread, on ``embed_speed.py``'s samples
(esp-idf en / zh_CN chunks, exactly what ``clawkb embed`` sends the model):

1. **Operator profile**: the shipped int8 session with onnxruntime's profiler on;
   kernel time summed per operator type (``QAttention`` holds the int8 QKV product
   and the float attention core).
2. **int8 GEMM rate**: one u8 x s8 ``MatMulInteger`` with constant weights (what
   ``DynamicQuantizeMatMul`` runs) at the encoder's shapes (K x N = 384 x 1152,
   384 x 1536, 1536 x 384) for M rows, in GOP per CPU-second; compare with the
   AMX-INT8 peak (2,048 int8 ops per cycle per core) and AVX-512 VNNI's (128-256).
3. **Sensitivity**: the cosine between each window's shipped vector and its vector
   when the input embeddings are scaled by ``1 + eps`` (a change at float32
   rounding level), and when the same int8 weights run through the unmasked
   ``MultiHeadAttention`` graph. The activations are quantised per tensor on the
   fly, so a rounding-level change that moves one tensor's zero point shifts every
   element of it: this is the floor under which no other way of computing the same
   graph can agree with today's vectors.
"""

from __future__ import annotations

import argparse
import collections
import datetime as dt
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from embed_speed import ESP, sample_texts  # noqa: E402
from shared_data import add_datasets_flag, datasets_dir, write_results  # noqa: E402

SHAPES = ((384, 1152), (384, 1536), (1536, 384))


def say(msg: str) -> None:
    print(f"[embed-profile] {msg}", file=sys.stderr, flush=True)


def op_profile(emb: Any, texts: list[str]) -> dict[str, Any]:
    import onnxruntime as ort

    from clawkb.embed.e5_onnx import optimized_model_path

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = opts.inter_op_num_threads = 1
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    opts.enable_profiling = True
    opts.profile_file_prefix = str(Path(tempfile.gettempdir()) / f"e5-profile-{os.getpid()}")
    shipped = emb._session
    emb._session = ort.InferenceSession(
        str(optimized_model_path(emb.img)), opts, providers=["CPUExecutionProvider"]
    )
    try:
        emb.embed_documents(texts[:2])  # first-run allocations outside the count
        emb.embed_documents(texts)
        path = Path(emb._session.end_profiling())
    finally:
        emb._session = shipped
    events = json.loads(path.read_text())
    path.unlink()
    per: collections.Counter[str] = collections.Counter()
    for e in events:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            per[e["args"]["op_name"]] += e["dur"]
    total = sum(per.values())
    return {op: round(us / total, 4) for op, us in per.most_common()}


def gemm_rates(rows: list[int], seconds: float = 0.3) -> list[dict[str, Any]]:
    import numpy as np
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    out = []
    rng = np.random.default_rng(0)
    for k, n in SHAPES:
        w = rng.integers(-128, 128, (k, n), dtype=np.int8)
        graph = helper.make_graph(
            [helper.make_node("MatMulInteger", ["A", "B"], ["Y"])],
            "gemm",
            [helper.make_tensor_value_info("A", TensorProto.UINT8, ["M", k])],
            [helper.make_tensor_value_info("Y", TensorProto.INT32, ["M", n])],
            [numpy_helper.from_array(w, "B")],
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = 8
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        sess = ort.InferenceSession(
            model.SerializeToString(), opts, providers=["CPUExecutionProvider"]
        )
        for m in rows:
            a = rng.integers(0, 256, (m, k), dtype=np.uint8)
            sess.run(None, {"A": a})
            best = float("inf")
            for _ in range(3):
                c, runs = time.process_time(), 0
                while time.process_time() - c < seconds:
                    sess.run(None, {"A": a})
                    runs += 1
                best = min(best, (time.process_time() - c) / runs)
            out.append(
                {"M": m, "K": k, "N": n, "gops_per_cpu_s": round(2 * m * k * n / best / 1e9)}
            )
    return out


class _Scaled:
    """A session whose input embeddings are scaled by ``1 + eps`` first."""

    def __init__(self, session: Any, eps: float) -> None:
        self.session, self.eps = session, eps

    def run(self, names: list[str], feed: dict[str, Any]) -> Any:
        import numpy as np

        return self.session.run(names, {**feed, "x": feed["x"] * np.float32(1 + self.eps)})


def sensitivity(emb: Any, texts: list[str], eps: float) -> dict[str, Any]:
    """Cosines to the shipped session's vector, per window of one (no padding)."""
    import numpy as np

    seqs = [ids[:510] for ids in emb.tok.encode_batch(["passage: " + t for t in texts])]

    def vecs(session: Any) -> Any:
        v = np.concatenate([emb._forward([s], session) for s in seqs])
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    base = vecs(emb.session)
    out: dict[str, Any] = {"windows": len(seqs)}
    for name, session in (("eps", _Scaled(emb.session, eps)), ("unmasked", emb.unmasked)):
        cos = (base * vecs(session)).sum(axis=1)
        out[name] = {
            "min": round(float(cos.min()), 5),
            "mean": round(float(cos.mean()), 5),
            "below_0.9999": int((cos < 0.9999).sum()),
        }
    return out


def render(doc: dict[str, Any]) -> str:
    lines = [
        f"{doc['when']} · onnxruntime {doc['onnxruntime']} · one inference thread · "
        f"{doc['cpus']} CPUs, load average {doc['load']:.1f} at start",
        "",
        "| set | texts | op: share of kernel time |",
        "|---|---:|---|",
    ]
    for name, s in doc["sets"].items():
        ops = ", ".join(f"{op} {share:.1%}" for op, share in s["ops"].items() if share >= 0.005)
        lines.append(f"| {name} | {s['texts']} | {ops} |")
    lines += ["", "| M | K x N | GOP per CPU-s |", "|---:|---|---:|"]
    lines += [f"| {g['M']} | {g['K']} x {g['N']} | {g['gops_per_cpu_s']} |" for g in doc["gemm"]]
    lines += [
        "",
        f"| set | windows | cos, x * (1 + {doc['eps']:g}): min / mean / below 0.9999 "
        "| cos, unmasked graph: min / mean / below 0.9999 |",
        "|---|---:|---|---|",
    ]
    for name, s in doc["sets"].items():
        e, u = s["sensitivity"]["eps"], s["sensitivity"]["unmasked"]
        lines.append(
            f"| {name} | {s['sensitivity']['windows']} | {e['min']:.5f} / {e['mean']:.5f} / "
            f"{e['below_0.9999']} | {u['min']:.5f} / {u['mean']:.5f} / {u['below_0.9999']} |"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_datasets_flag(ap)
    ap.add_argument("--sets", default="esp-en,esp-zh")
    ap.add_argument("--chunks", type=int, default=60)
    ap.add_argument("--files", type=int, default=300)
    ap.add_argument("--seed", type=int, default=24)
    ap.add_argument("--rows", default="64,330,4096", help="GEMM rows (M) to time")
    ap.add_argument("--eps", type=float, default=1e-6)
    ap.add_argument("--out-dir", type=Path, default=HERE / "results")
    args = ap.parse_args()
    import onnxruntime as ort

    from clawkb.embed.e5 import E5Small

    data = datasets_dir(args.datasets)
    emb = E5Small(workers=1)
    emb.warm()
    doc: dict[str, Any] = {
        "when": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "onnxruntime": ort.__version__,
        "cpus": os.cpu_count(),
        "load": os.getloadavg()[0],
        "eps": args.eps,
        "sets": {},
    }
    for name in args.sets.split(","):
        if name not in ESP:
            raise SystemExit(f"embed_profile: unknown set {name!r} (one of {', '.join(ESP)})")
        texts = sample_texts(data, name, args.chunks, args.files, args.seed)
        if texts is None:
            say(f"{name}: no data under {data}, skipped")
            continue
        say(f"{name}: profiling {len(texts)} texts")
        doc["sets"][name] = {
            "texts": len(texts),
            "ops": op_profile(emb, texts),
            "sensitivity": sensitivity(emb, texts, args.eps),
        }
    say("timing the int8 GEMM")
    doc["gemm"] = gemm_rates([int(m) for m in args.rows.split(",")])
    write_results(args.out_dir, "embed-profile.json", "embed-profile.md", doc, render)


if __name__ == "__main__":
    main()
