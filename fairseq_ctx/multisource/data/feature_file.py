"""Dense auxiliary inputs (image features): memory-mapped ``.npy`` files, validated up front."""
import os
from typing import Optional

import numpy as np
import torch

FEATURE_DTYPES = (np.float16, np.float32)
NAN_SCAN_ROWS = 4096


class FeatureInputError(ValueError):
    """A feature file does not fit the text data or the model; the message names the file."""


def feature_path(data_dir: str, split: str, name: str) -> str:
    return os.path.join(data_dir, f"{split}.{name}.npy")


def ids_path(data_dir: str, split: str, name: str) -> str:
    return os.path.join(data_dir, f"{split}.{name}.ids")


def open_features(path: str) -> np.ndarray:
    """Open a (n, d) or (n, R, d) float16/float32 array memory-mapped (never read whole)."""
    if not os.path.exists(path):
        raise FeatureInputError(
            f"feature file {path} does not exist; write one row per sentence of this split "
            f"(numpy.save, shape (n, d) or (n, R, d)) or drop the input from --feature-inputs"
        )
    try:
        array = np.load(path, mmap_mode="r", allow_pickle=False)
    except ValueError as err:
        raise FeatureInputError(f"feature file {path} is not a plain .npy array: {err}") from err
    if isinstance(array, np.lib.npyio.NpzFile):
        names = ", ".join(array.files)
        array.close()
        raise FeatureInputError(f"feature file {path} is a .npz archive (arrays: {names}), not one .npy array; save "
                                f"the features with numpy.save, or take one array out: "
                                f"numpy.save(OUT, numpy.load({path!r})[NAME])")
    if array.ndim not in (2, 3):
        raise FeatureInputError(f"feature file {path} has shape {array.shape}; expected (n, d) or (n, R, d)")
    if array.dtype not in FEATURE_DTYPES:
        raise FeatureInputError(f"feature file {path} has dtype {array.dtype}; save it as float16 or float32")
    if array.shape[-1] == 0 or (array.ndim == 3 and array.shape[1] == 0):
        empty = "regions" if array.ndim == 3 and array.shape[1] == 0 else "feature dimension"
        raise FeatureInputError(f"feature file {path} has shape {array.shape}: its rows have 0 {empty}, so they hold "
                                f"no features; extract the features again (shape (n, d) or (n, R, d) with R, d >= 1)")
    return array


def check_row_shape(path: str, array: np.ndarray, reference_path: str, reference: np.ndarray) -> None:
    """Every split of one input has the same row layout, (d) or (R, d) with the same R: a (n, d) file
    in one split and (n, R, d) in another would otherwise be read as one region in the first. (The
    feature dimension is checked against the model, which is built from the training split's.)"""
    if array.shape[1:-1] != reference.shape[1:-1]:
        raise FeatureInputError(
            f"feature file {path} has shape {array.shape} but {reference_path} has shape {reference.shape}; every "
            f"split of an input needs the same row shape, (d) or (regions, d): extract all splits the same way"
        )


def first_non_finite_row(array: np.ndarray, chunk_rows: int = NAN_SCAN_ROWS) -> Optional[int]:
    """Index of the first row holding NaN or inf, scanning the memory map chunk by chunk."""
    for start in range(0, len(array), chunk_rows):
        chunk = np.asarray(array[start:start + chunk_rows], dtype=np.float32).reshape(min(chunk_rows, len(array) - start), -1)
        bad = ~np.isfinite(chunk).all(axis=1)
        if bad.any():
            return start + int(np.argmax(bad))
    return None


def read_row_ids(path: str, num_sentences: int, num_rows: int) -> np.ndarray:
    """``{split}.{name}.ids``: one integer row index per sentence (several sentences may share a row)."""
    with open(path, encoding="utf-8") as handle:
        lines = handle.read().splitlines()
    if len(lines) != num_sentences:
        raise FeatureInputError(f"{path} has {len(lines)} lines but the split has {num_sentences} sentences; one row index per sentence")
    ids = np.empty(num_sentences, dtype=np.int64)
    for line_no, line in enumerate(lines, start=1):
        try:
            ids[line_no - 1] = int(line)
        except ValueError:
            raise FeatureInputError(f"{path} line {line_no}: '{line}' is not an integer row index") from None
        if not 0 <= ids[line_no - 1] < num_rows:
            raise FeatureInputError(f"{path} line {line_no}: row {line} is outside the feature file's 0..{num_rows - 1}")
    return ids


class FeatureFile:
    """One split's features for one named input: rows looked up per sentence, returned in the
    file's own dtype (float16 or float32; the models cast them) as tensors of shape (R, d) (R = 1
    for (n, d) files); a batch's rows in one read of the memory map (:meth:`rows`)."""

    def __init__(self, data_dir: str, split: str, name: str, num_sentences: int):
        self.path = feature_path(data_dir, split, name)
        self.name = name
        self.array = open_features(self.path)
        row_ids = ids_path(data_dir, split, name)
        if os.path.exists(row_ids):
            self.row_of = read_row_ids(row_ids, num_sentences, len(self.array))
        else:
            if len(self.array) != num_sentences:
                raise FeatureInputError(
                    f"feature file {self.path} has {len(self.array)} rows but split '{split}' has "
                    f"{num_sentences} sentences; write one row per sentence or add {row_ids} mapping lines to rows"
                )
            self.row_of = np.arange(num_sentences)
        bad_row = first_non_finite_row(self.array)
        if bad_row is not None:
            raise FeatureInputError(
                f"feature file {self.path} has NaN/inf values; first bad row index {bad_row}; "
                f"re-extract or replace those rows"
            )

    @property
    def dim(self) -> int:
        return int(self.array.shape[-1])

    @property
    def regions(self) -> int:
        return int(self.array.shape[1]) if self.array.ndim == 3 else 1

    def __getitem__(self, index: int) -> torch.Tensor:
        """The row of sentence ``index``, (R, d)."""
        return torch.from_numpy(np.array(self.array[self.row_of[index]])).view(self.regions, self.dim)

    def rows(self, indices: np.ndarray) -> torch.Tensor:
        """The rows of sentences ``indices``, (B, R, d), gathered by one read of the memory map
        (16x faster than stacking per-sentence rows converted to float32, for 48 sentences of
        196 x 2048 float16 features: benchmarks/multimodal_collation.py)."""
        return torch.from_numpy(self.array[self.row_of[indices]]).view(len(indices), self.regions, self.dim)
