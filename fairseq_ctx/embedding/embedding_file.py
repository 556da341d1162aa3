"""Reading and checking embedding files: one float row per sentence or document.

Every tool that reads embeddings (``fairseq-ctx-xsim``, ``-doc-classify``, ``-plot-embeddings``)
reads them here, so that a NaN/inf row, an all-zero row (what an interrupted
``fairseq-ctx-embed`` leaves), an empty file or a file of the wrong shape is refused with the
file and the first bad row named, instead of silently skewing a score. Row ``i`` is line ``i + 1``
of the text that was embedded.

Formats: ``.npy`` (what ``fairseq-ctx-embed`` writes, shape (rows, dim)), or LASER's raw binary
files (float32, or float16 with ``fp16``) when ``dim`` is given.
"""
import os
from typing import Optional

import numpy as np

CHECK_BLOCK_ROWS = 65536


class EmbeddingFileError(ValueError):
    """An embedding file (or array) that cannot be used: missing, empty, wrong shape, bad rows."""


def read_embeddings(path: str, dim: Optional[int] = None, fp16: bool = False) -> np.ndarray:
    """The (rows, dim) float32 embeddings of ``path``, checked with :func:`check_embeddings`.

    ``.npy`` files are read as they are; any other file is read as LASER's raw binary format
    (``dim`` floats per row, float16 when ``fp16``), which needs ``dim``.
    """
    if not os.path.isfile(path):
        raise EmbeddingFileError(f"embedding file {path} does not exist")
    if path.endswith(".npy"):
        try:
            array = np.load(path)
        except (ValueError, OSError, EOFError) as err:
            raise EmbeddingFileError(f"embedding file {path} is not a readable .npy file ({err}); "
                                     f"write it with numpy.save or fairseq-ctx-embed") from err
        if isinstance(array, np.lib.npyio.NpzFile):
            names = ", ".join(array.files)
            array.close()
            raise EmbeddingFileError(f"embedding file {path} is a .npz archive (arrays: {names}) under a .npy name, "
                                     f"not one array; save the embeddings with numpy.save, or take one array out: "
                                     f"numpy.save(OUT, numpy.load({path!r})[NAME])")
    else:
        if dim is None:
            raise EmbeddingFileError(f"embedding file {path} is not a .npy file; for LASER's raw binary "
                                     f"embeddings give their dimension (--dim, and --fp16 if stored in float16)")
        array = _read_raw(path, dim, fp16)
    return check_embeddings(np.asarray(array, dtype=np.float32), path)


def _read_raw(path: str, dim: int, fp16: bool) -> np.ndarray:
    dtype = np.dtype(np.float16 if fp16 else np.float32)
    size = os.path.getsize(path)
    if dim <= 0 or size % (dim * dtype.itemsize):
        raise EmbeddingFileError(f"embedding file {path} has {size} bytes, not a whole number of rows of "
                                 f"{dim} {dtype.name} values; check --dim and --fp16")
    return np.fromfile(path, dtype=dtype).reshape(-1, dim)


def check_embeddings(array: np.ndarray, name: str) -> np.ndarray:
    """``array`` if it is a usable (rows, dim) embedding matrix, else an :class:`EmbeddingFileError`
    naming ``name`` (the file) and the first bad row. Checked in blocks of rows, so the check
    needs little memory beyond the array."""
    if array.ndim != 2:
        raise EmbeddingFileError(f"embedding file {name} has shape {array.shape}; expected (rows, dim), "
                                 f"one row per sentence")
    if len(array) == 0 or array.shape[1] == 0:
        raise EmbeddingFileError(f"embedding file {name} has {len(array)} rows of dimension {array.shape[1]}; "
                                 f"it is empty: embed a non-empty text file")
    for start in range(0, len(array), CHECK_BLOCK_ROWS):
        block = array[start:start + CHECK_BLOCK_ROWS]
        bad = ~np.isfinite(block).all(axis=1)
        if bad.any():
            row = start + int(bad.argmax())
            raise EmbeddingFileError(f"embedding file {name} has NaN/inf values; first bad row {row} (line "
                                     f"{row + 1} of the embedded text); re-embed the text or remove those rows "
                                     f"(and the same lines of the aligned files)")
        zero = ~block.any(axis=1)
        if zero.any():
            row = start + int(zero.argmax())
            raise EmbeddingFileError(f"embedding file {name} has an all-zero row {row} (line {row + 1} of the "
                                     f"embedded text), which no model produces: the file is incomplete (an "
                                     f"interrupted fairseq-ctx-embed leaves zero rows); embed the text again")
    return array

