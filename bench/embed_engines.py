"""Ways to run e5-small faster, against the shipped int8 session, same process, same texts.

    OMP_NUM_THREADS=1 nice -n 10 .venv/bin/python bench/embed_engines.py --chunks 40
    .venv/bin/python bench/embed_engines.py --sets esp-en --variants ort-int8,ov-bf16

Issue 24 asks for 1.5x the chunks per second of today's embedder on real
chunk lengths. ``bench/embed_speed.py`` compares two trees; this script
compares *ways of running the same weights* on the same texts (the samples
``embed_speed.py`` makes of esp-idf-docs en / zh_CN, cranfield and
cmrc2018), so a candidate can be judged before any of it is wired into the
product:

- ``ort-int8``: the shipped session (fused int8 ``QAttention``, int8 matrix
  products, float32 attention core), the reference for speed;
- ``ort-fp32``: the same graph unquantised, the reference for vectors;
- ``ort-int8-mha``: the attention split into an int8 QKV ``MatMul`` and
  ``MultiHeadAttention`` without a mask when a batch holds one window (no
  padding: onnxruntime's unmasked attention path), the masked one otherwise;
- ``ov-bf16`` / ``ov-int8w``: OpenVINO (only when the ``openvino`` package is
  installed; it is not a dependency) on the float graph in bfloat16 (AMX-BF16
  on CPUs that have it), and with int8 per-channel weights plus dynamic
  activation quantisation;
- ``ov-int8-nncf``: OpenVINO on the float graph after NNCF post-training
  quantisation (int8 weights *and* activations, transformer preset, calibrated
  on ~300 chunks of this repository's own docs/ and examples/, both languages,
  none from an evaluation set): its matrix products run on AMX-INT8 / VNNI;
- ``ort-int8-w256`` / ``-w128``: the shipped session on shorter windows
  (texts cut into equal windows of at most 256 / 128 tokens, pooled vectors
  averaged by length): the attention cost grows with the square of the window.

Every variant embeds the texts in the same process, one inference thread, one
worker, rounds interleaved; the best round's process CPU time counts. Reported:
chunks per CPU-second, the ratio to ``ort-int8``, and the cosine of each
text's vector to ``ort-fp32``'s and to ``ort-int8``'s (the shipped vectors).
Results: ``results/embed-engines.md``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import resource
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from embed_speed import CACHE, SETS, sample_texts  # noqa: E402
from shared_data import add_datasets_flag, datasets_dir, write_results  # noqa: E402

VARIANTS = (
    "ort-int8",
    "ort-fp32",
    "ort-int8-mha",
    "ov-bf16",
    "ov-int8w",
    "ov-int8-nncf",
    "ort-int8-w256",
    "ort-int8-w128",
)

Runner = Callable[[np.ndarray, np.ndarray], np.ndarray]


def say(msg: str) -> None:
    print(f"[embed-engines] {msg}", file=sys.stderr, flush=True)


def cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


# ---------------------------------------------------------------- graphs


def mha_graph(fp32: Any, masked: bool) -> Any:
    """The float graph with each fused ``Attention`` replaced by MatMul + bias + Split +
    ``MultiHeadAttention`` (masked by the per-row key mask, or with no mask at all)."""
    import onnx
    from onnx import helper, numpy_helper

    model = onnx.ModelProto()
    model.CopyFrom(fp32)
    g = model.graph
    out = []
    for n in g.node:
        if n.op_type != "Attention":
            out.append(n)
            continue
        x, w, b, mask = n.input[:4]
        heads = next(a.i for a in n.attribute if a.name == "num_heads")
        p = n.output[0]
        width = next(numpy_helper.to_array(i).shape[1] for i in g.initializer if i.name == w)
        split = numpy_helper.from_array(np.array([width // 3] * 3, np.int64), p + ".splits")
        g.initializer.append(split)
        out += [
            helper.make_node("MatMul", [x, w], [p + ".qkv_mm"], name=p + ".qkv_mm"),
            helper.make_node("Add", [p + ".qkv_mm", b], [p + ".qkv"], name=p + ".qkv"),
            helper.make_node(
                "Split", [p + ".qkv", split.name], [p + q for q in (".q", ".k", ".v")], axis=2
            ),
            helper.make_node(
                "MultiHeadAttention",
                [p + ".q", p + ".k", p + ".v"] + (["", mask] if masked else []),
                [p],
                name=p,
                domain="com.microsoft",
                num_heads=heads,
            ),
        ]
    del g.node[:]
    g.node.extend(out)
    return model


def int8_weights(fp32: Any) -> Any:
    """Per-output-channel symmetric int8 weights behind DequantizeLinear (OpenVINO reads
    this as compressed weights and can quantise activations on the fly)."""
    import onnx
    from onnx import helper, numpy_helper

    model = onnx.ModelProto()
    model.CopyFrom(fp32)
    g = model.graph
    targets = {n.input[1] for n in g.node if n.op_type in ("MatMul", "Attention")}
    inits = {i.name: i for i in g.initializer}
    front = []
    for name in sorted(targets & inits.keys()):
        w = numpy_helper.to_array(inits[name]).astype(np.float32)
        scale = np.abs(w).max(axis=0) / 127.0
        scale[scale == 0] = 1.0
        q = np.clip(np.round(w / scale), -127, 127).astype(np.int8)
        g.initializer.remove(inits[name])
        g.initializer.extend(
            [
                numpy_helper.from_array(q, name + ".q8"),
                numpy_helper.from_array(scale.astype(np.float32), name + ".scale"),
            ]
        )
        front.append(
            helper.make_node(
                "DequantizeLinear", [name + ".q8", name + ".scale"], [name], axis=1, name=name
            )
        )
    rest = list(g.node)
    del g.node[:]
    g.node.extend(front + rest)
    return model


def ort_session(path: Path) -> Any:
    import onnxruntime as ort

    from clawkb.embed.e5_onnx import DISABLED_OPTIMIZERS

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    return ort.InferenceSession(
        str(path),
        opts,
        providers=["CPUExecutionProvider"],
        disabled_optimizers=DISABLED_OPTIMIZERS,
    )


def quantised(fp32_model: Any, dest: Path) -> Path:
    import onnx

    from clawkb.embed.e5_onnx import quantize_int8

    src = dest.with_suffix(".fp32.onnx")
    onnx.save(fp32_model, str(src))
    quantize_int8(src, dest)
    return dest


CALIB_SOURCES = ("docs", "examples", "README.md", "ARCHITECTURE.md")


def calibration_texts(root: Path, n: int = 300, size: int = 600) -> list[str]:
    """~``size``-character chunks of the repository's own prose (paragraphs joined),
    Chinese and English alternated so both scripts shape the activation ranges."""
    import re

    cjk = re.compile(r"[\u4e00-\u9fff]")
    files: list[Path] = []
    for name in CALIB_SOURCES:
        p = root / name
        files += sorted(p.rglob("*")) if p.is_dir() else [p]
    chunks: list[str] = []
    for f in files:
        if f.suffix not in (".md", ".txt", ".yaml") or not f.is_file():
            continue
        cur = ""
        for para in re.split(r"\n\s*\n", f.read_text(encoding="utf-8", errors="replace")):
            para = para.strip()
            if cur and len(cur) + len(para) > size:
                chunks.append(cur)
                cur = ""
            cur = (cur + "\n\n" + para).strip()
        if cur:
            chunks.append(cur)
    zh = [c for c in chunks if len(cjk.findall(c)) * 10 > len(c)]
    en = [c for c in chunks if len(cjk.findall(c)) * 10 <= len(c)]
    out: list[str] = []
    while len(out) < n and (zh or en):
        for pool in (zh, en):
            if pool and len(out) < n:
                out.append(pool.pop(0))
    return out


def calibration_feeds(emb: Any, texts: list[str]) -> list[dict[str, np.ndarray]]:
    """The model inputs the product builds for ``texts`` (its windows and length buckets)."""
    feeds: list[dict[str, np.ndarray]] = []

    class Capture:
        def run(self, _names: list[str], feed: dict[str, np.ndarray]) -> list[np.ndarray]:
            feeds.append({k: v.copy() for k, v in feed.items()})
            return [np.zeros((len(feed["x"]), emb.dim), np.float32)]

    shipped, emb._session = emb._session, Capture()
    try:
        emb.embed_documents(texts)
    finally:
        emb._session = shipped
    return feeds


def nncf_model(emb: Any, fp32_path: Path) -> Any:
    """The float graph through NNCF's post-training quantisation (int8 weights and activations)."""
    import nncf
    import openvino as ov

    core = ov.Core()
    # the result is kept next to the other bench caches: NNCF's calibration costs minutes
    cached = CACHE / f"ov-int8-nncf-{fp32_path.stem}.xml"
    if cached.is_file():
        return core.read_model(str(cached))
    texts = calibration_texts(HERE.parent)
    feeds = calibration_feeds(emb, texts)
    say(f"ov-int8-nncf: calibrating on {len(texts)} texts, {len(feeds)} batches")
    c0 = cpu_seconds()
    model = core.read_model(str(fp32_path))
    # NNCF finds nodes by friendly name; the ONNX reader's generated names can repeat
    # once the same file was read before in this process
    seen: set[str] = set()
    for i, op in enumerate(model.get_ordered_ops()):
        if op.get_friendly_name() in seen:
            op.set_friendly_name(f"{op.get_friendly_name()}.{i}")
        seen.add(op.get_friendly_name())
    model = nncf.quantize(
        model,
        nncf.Dataset(feeds),
        model_type=nncf.ModelType.TRANSFORMER,
        subset_size=len(feeds),
    )
    say(f"ov-int8-nncf: quantised in {cpu_seconds() - c0:.1f} CPU-s")
    ov.save_model(model, str(cached))
    return model


def runners(emb: Any, names: list[str], work: Path) -> dict[str, tuple[Runner, int]]:
    """name -> (run(x, mask) -> pooled, window length)."""
    import onnx

    from clawkb.embed.e5_onnx import built_model_path

    out: dict[str, tuple[Runner, int]] = {}
    wmax = emb.img.MAXP - 2
    fp32_path = built_model_path(emb.img, "fp32")

    def ort_run(sess: Any) -> Runner:
        return lambda x, m: np.asarray(sess.run(["pooled"], {"x": x, "mask": m})[0])

    shipped = ort_run(emb.session)
    # the NNCF variant first: it reads the float graph before any other OpenVINO variant
    for name in sorted(names, key=lambda n: n != "ov-int8-nncf"):
        base, _, win = name.rpartition("-w")
        if base and win.isdigit() and base != "ort-int8":  # e.g. ort-int8-mha-w256
            sub = runners(emb, [base], work)
            if base in sub:
                out[name] = (sub[base][0], int(win))
        elif name == "ort-int8":
            out[name] = (shipped, wmax)
        elif name.startswith("ort-int8-w"):
            out[name] = (shipped, int(name.rsplit("w", 1)[1]))
        elif name == "ort-fp32":
            out[name] = (ort_run(ort_session(fp32_path)), wmax)
        elif name == "ort-int8-mha":
            fp32 = onnx.load(str(fp32_path))
            plain = ort_run(ort_session(quantised(mha_graph(fp32, False), work / "mha.onnx")))
            masked = ort_run(ort_session(quantised(mha_graph(fp32, True), work / "mha-m.onnx")))

            def mha_run(
                x: np.ndarray, m: np.ndarray, one: Runner = plain, many: Runner = masked
            ) -> np.ndarray:
                return one(x, m) if len(x) == 1 else many(x, m)

            out[name] = (mha_run, wmax)
        elif name.startswith("ov-"):
            try:
                import openvino as ov
            except ImportError:
                say(f"{name}: openvino is not installed, skipped")
                continue
            core = ov.Core()
            cfg: dict[str, Any] = {"INFERENCE_NUM_THREADS": 1, "NUM_STREAMS": 1}
            cfg["INFERENCE_PRECISION_HINT"] = "bf16"
            if name == "ov-int8w":
                path = work / "int8w.onnx"
                onnx.save(int8_weights(onnx.load(str(fp32_path))), str(path))
                cfg["DYNAMIC_QUANTIZATION_GROUP_SIZE"] = 32
                model = core.read_model(str(path))
            elif name == "ov-int8-nncf":
                try:
                    model = nncf_model(emb, fp32_path)
                except ImportError:
                    say(f"{name}: nncf is not installed, skipped")
                    continue
            else:
                model = core.read_model(str(fp32_path))
            req = core.compile_model(model, "CPU", cfg).create_infer_request()

            def ov_run(x: np.ndarray, m: np.ndarray, req: Any = req) -> np.ndarray:
                return np.array(req.infer({"x": x, "mask": m})[0])

            out[name] = (ov_run, wmax)
    return out


# ---------------------------------------------------------------- embedding


def embed(emb: Any, texts: list[str], run: Runner, wmax: int) -> np.ndarray:
    """``E5Small.embed_documents`` with the model call and the window length swapped in:
    pooled vectors of a text's windows averaged by length, as the product does."""
    from clawkb.embed.base import l2_normalize

    windows: list[tuple[int, list[int]]] = []
    for i, ids in enumerate(emb.tok.encode_batch(["passage: " + t for t in texts])):
        # the product's rule at full length (510-token windows, remainder last); equal
        # windows for the shorter-window variants
        k = max(1, -(-len(ids) // wmax))
        size = wmax if wmax >= emb.img.MAXP - 2 else max(1, -(-len(ids) // k))
        for a in range(0, max(len(ids), 1), size):
            windows.append((i, ids[a : a + size]))
    acc = np.zeros((len(texts), emb.dim), np.float64)
    weight = np.zeros(len(texts), np.float64)
    shipped, emb._session = emb._session, _Session(run)
    try:
        done = [(b, emb._forward([ids for _, ids in b])) for b in emb._batches(windows)]
    finally:
        emb._session = shipped
    for batch, pooled in done:
        for (i, ids), vec in zip(batch, pooled, strict=True):
            acc[i] += max(len(ids), 1) * vec
            weight[i] += max(len(ids), 1)
    return l2_normalize((acc / np.maximum(weight, 1)[:, None]).astype(np.float32))


class _Session:
    """Looks like an onnxruntime session to ``E5Small._forward``: its inputs are built
    exactly as the product builds them, then handed to the variant's runner."""

    def __init__(self, run: Runner) -> None:
        self._run = run

    def run(self, _names: list[str], feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        return [self._run(feeds["x"], feeds["mask"])]


def render(doc: dict[str, Any]) -> str:
    lines = [
        "# Ways to run e5-small, same process, same texts (bench/embed_engines.py)",
        "",
        f"{doc['date']} · {doc['rounds']} rounds interleaved, best counts · one inference "
        f"thread · {doc['cpus']} CPUs, load average {doc['load']:.1f} at start · "
        f"onnxruntime {doc['ort']}, openvino {doc['ov'] or 'not installed'}. "
        "Ratio = ort-int8's CPU time over the variant's; cos = per-text cosine (min / mean).",
        "",
        "| set | texts | variant | chunks/CPU-s | **ratio** | cos to fp32 min / mean "
        "| cos to shipped min / mean |",
        "|---|---:|---|---:|---:|---:|---:|",
    ]
    for name, r in doc["sets"].items():
        base = r["variants"]["ort-int8"]["cpu"]
        for v, m in r["variants"].items():
            lines.append(
                f"| {name} | {r['n']} | {v} | {r['n'] / m['cpu']:.2f} | **{base / m['cpu']:.2f}x** "
                f"| {m.get('fp32_min', float('nan')):.4f} / {m.get('fp32_mean', float('nan')):.4f} "
                f"| {m['int8_min']:.4f} / {m['int8_mean']:.4f} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sets", default="esp-en,esp-zh")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--chunks", type=int, default=40, help="texts per set")
    ap.add_argument("--files", type=int, default=300, help=".rst files per esp-idf language")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--seed", type=int, default=24)
    ap.add_argument("--out-dir", type=Path, default=HERE / "results")
    add_datasets_flag(ap)
    args = ap.parse_args(argv)
    import onnxruntime as ort

    from clawkb.embed.e5 import E5Small

    try:
        import openvino

        ov_version = openvino.__version__
    except ImportError:
        ov_version = ""
    data = datasets_dir(args.datasets)
    emb = E5Small(workers=1)
    emb.warm()
    CACHE.mkdir(parents=True, exist_ok=True)
    names = [v.strip() for v in args.variants.split(",") if v.strip()]
    if "ort-int8" not in names:
        names.insert(0, "ort-int8")
    doc: dict[str, Any] = {
        "date": dt.datetime.now().strftime("%Y-%m-%d %H:%M"),
        "rounds": args.rounds,
        "cpus": os.cpu_count(),
        "load": os.getloadavg()[0],
        "ort": ort.__version__,
        "ov": ov_version,
        "sets": {},
    }
    with tempfile.TemporaryDirectory(dir=CACHE, prefix=".engines-") as tmp:
        runs = runners(emb, names, Path(tmp))
        for set_name in [s.strip() for s in args.sets.split(",") if s.strip()]:
            if set_name not in SETS:
                raise SystemExit(f"--sets: {set_name!r} is not one of {', '.join(SETS)}")
            texts = sample_texts(data, set_name, args.chunks, args.files, args.seed)
            if not texts:
                say(f"{set_name}: dataset not found under {data}, skipped")
                continue
            for run, wmax in runs.values():  # warm every variant on these shapes
                embed(emb, texts[:4], run, wmax)
            best: dict[str, float] = {}
            vecs: dict[str, np.ndarray] = {}
            for rnd in range(args.rounds):
                for v, (run, wmax) in runs.items():
                    c0 = cpu_seconds()
                    vecs[v] = embed(emb, texts, run, wmax)
                    cpu = cpu_seconds() - c0
                    best[v] = min(best.get(v, float("inf")), cpu)
                    say(f"{set_name} round {rnd + 1} {v}: {len(texts) / cpu:.2f} chunks/CPU-s")
            res: dict[str, Any] = {}
            for v in runs:
                m: dict[str, float] = {"cpu": best[v]}
                for ref, key in (("ort-fp32", "fp32"), ("ort-int8", "int8")):
                    if ref in vecs:
                        cos = np.sum(vecs[v] * vecs[ref], axis=1)
                        m[f"{key}_min"], m[f"{key}_mean"] = float(cos.min()), float(cos.mean())
                res[v] = m
            doc["sets"][set_name] = {"n": len(texts), "variants": res}
    write_results(args.out_dir, "embed-engines.json", "embed-engines.md", doc, render)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
