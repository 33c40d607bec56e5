"""The e5-small encoder in plain numpy, float32: the cold-process query path.

A fresh ``clawkb search`` embeds one short query. Through onnxruntime that
costs importing the runtime (~0.12 CPU-s: loading its shared library) and
opening a session (~0.07 CPU-s) before a 4 ms inference. numpy is already
loaded on every search, so this module runs the same network — the graph of
:mod:`clawkb.embed.e5_onnx` at float precision: embedding LayerNorm, 12 blocks
of self-attention and tanh-GELU feed-forward with post-LayerNorms, masked mean
pooling — from float32 weights kept on disk and memory-mapped
(``e5-small-<digest>-np-fp32.npy`` in the model cache, 85 MB, written once from
the 4-bit blocks). Its vectors equal the fp32 ONNX graph's to ~1e-6
(``tests/test_embedders.py``); :class:`clawkb.embed.e5.E5Small` decides when to
use it (bench/dense_cold.py measures both paths).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np

from clawkb.embed.e5_weights import E5Image

#: Part of the cache file name; bump when the weight layout changes.
LAYOUT_VERSION = "1"


def _layout(img: E5Image) -> list[tuple[str, int, int]]:
    """(name, rows, cols) of every matrix in file order, stored as [in, out]."""
    H, FF = img.H, img.FF
    out: list[tuple[str, int, int]] = []
    for layer in range(img.NL):
        p = f"l{layer}"
        out += [(f"{p}.qkv", H, 3 * H), (f"{p}.ao", H, H), (f"{p}.fi", H, FF), (f"{p}.fo", FF, H)]
    return out


def weights_path(img: E5Image, cache: Path) -> Path:
    return cache / f"e5-small-{img.digest[:16]}-np{LAYOUT_VERSION}-fp32.npy"


def build_weights(img: E5Image) -> np.ndarray:
    H, FF = img.H, img.FF
    parts: list[np.ndarray] = []
    for layer in range(img.NL):
        p = f"l{layer}"
        parts.append(np.concatenate([img.q4(f"{p}.{n}.w", H, H).T for n in "qkv"], axis=1))
        parts.append(img.q4(f"{p}.ao.w", H, H).T)
        parts.append(img.q4(f"{p}.fi.w", FF, H).T)
        parts.append(img.q4(f"{p}.fo.w", H, FF).T)
    return np.concatenate([np.ascontiguousarray(m, np.float32).ravel() for m in parts])


def load_weights(img: E5Image, cache: Path) -> np.ndarray:
    path = weights_path(img, cache)
    if not path.is_file():
        flat = build_weights(img)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".np-", suffix=".npy")
        try:
            with os.fdopen(fd, "wb") as fh:
                np.save(fh, flat)
            os.chmod(tmp, 0o644)
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    return np.load(path, mmap_mode="r")


def _layernorm(x: np.ndarray, g: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    mu = x.mean(axis=-1, keepdims=True)
    xc = x - mu
    var = (xc * xc).mean(axis=-1, keepdims=True)
    return xc / np.sqrt(var + eps) * g + b


def _gelu_tanh(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + np.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))


class NumpyEncoder:
    """``pooled = encoder(x, mask)`` with the ONNX graph's inputs and output."""

    def __init__(self, img: E5Image, flat: np.ndarray) -> None:
        self.img = img
        self.mats: dict[str, np.ndarray] = {}
        at = 0
        for name, rows, cols in _layout(img):
            self.mats[name] = flat[at : at + rows * cols].reshape(rows, cols)
            at += rows * cols
        if at != flat.shape[0]:
            raise ValueError(f"{img.path}: cached numpy weights do not fit the image's shapes")

    def _vec(self, name: str, n: int) -> np.ndarray:
        return self.img.f32(name, (n,))

    def __call__(self, x: np.ndarray, mask: np.ndarray) -> np.ndarray:
        img, H, NH = self.img, self.img.H, self.img.NH
        eps = float(img.eps)
        B, T, _ = x.shape
        dh = H // NH
        x = _layernorm(x, self._vec("emb.ln.w", H), self._vec("emb.ln.b", H), eps)
        bias = ((1.0 - mask) * -10000.0)[:, None, None, :].astype(np.float32)
        scale = np.float32(1.0 / np.sqrt(dh))
        for layer in range(img.NL):
            p = f"l{layer}"
            qkv_b = np.concatenate([self._vec(f"{p}.{n}.b", H) for n in "qkv"])
            qkv = x @ self.mats[p + ".qkv"] + qkv_b  # [B,T,3H]
            q, k, v = (qkv[..., i * H : (i + 1) * H].reshape(B, T, NH, dh) for i in range(3))
            s = np.einsum("bqhd,bkhd->bhqk", q, k) * scale + bias
            s -= s.max(axis=-1, keepdims=True)
            np.exp(s, out=s)
            s /= s.sum(axis=-1, keepdims=True)
            att = np.einsum("bhqk,bkhd->bqhd", s, v).reshape(B, T, H)
            y = att @ self.mats[p + ".ao"] + self._vec(f"{p}.ao.b", H) + x
            x = _layernorm(y, self._vec(f"{p}.aln.w", H), self._vec(f"{p}.aln.b", H), eps)
            mid = _gelu_tanh(x @ self.mats[p + ".fi"] + self._vec(f"{p}.fi.b", img.FF))
            y = mid @ self.mats[p + ".fo"] + self._vec(f"{p}.fo.b", H) + x
            x = _layernorm(y, self._vec(f"{p}.oln.w", H), self._vec(f"{p}.oln.b", H), eps)
        summed = (x * mask[:, :, None]).sum(axis=1)
        return (summed / mask.sum(axis=1, keepdims=True)).astype(np.float32)
