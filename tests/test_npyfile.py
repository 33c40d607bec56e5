"""The ast-free .npy reader gives what np.load gives, and one line for a bad file."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from clawkb.index import npyfile

ARRAYS = {
    "ints": np.arange(1000, dtype=np.int64),
    "u8": np.array([1, 0, 1], np.uint8),
    "f32_2d": np.arange(24, dtype="<f4").reshape(6, 4),
    "fortran": np.asfortranarray(np.arange(12, dtype=np.int32).reshape(3, 4)),
    "empty": np.zeros(0, np.uint32),
    "empty_2d": np.zeros((0, 8), np.float32),
    "scalar": np.array(7, np.int16),
    "structured": np.zeros(3, dtype=[("a", "<i4"), ("b", "<f8")]),
}


@pytest.mark.parametrize("name", sorted(ARRAYS))
@pytest.mark.parametrize("mmap", [False, True])
def test_same_as_np_load(tmp_path: Path, name: str, mmap: bool) -> None:
    path = tmp_path / f"{name}.npy"
    np.save(path, ARRAYS[name])
    got = npyfile.load(path, mmap=mmap)
    want = np.load(path)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert np.array_equal(got, want)


def test_truncated_and_foreign_files_are_one_line(tmp_path: Path) -> None:
    path = tmp_path / "ids.npy"
    np.save(path, np.arange(100, dtype=np.int64))
    path.write_bytes(path.read_bytes()[:300])
    with pytest.raises(ValueError, match=r"ids\.npy: truncated"):
        npyfile.load(path)
    path.write_bytes(b"not numpy at all")
    with pytest.raises(ValueError, match=r"ids\.npy: not a \.npy file"):
        npyfile.load(path)
