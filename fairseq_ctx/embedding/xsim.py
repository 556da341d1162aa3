"""xsim: the bitext retrieval error rate as LASER defines it (Artetxe & Schwenk, 2019).

Row i of the source embeddings is the translation of row i of the target embeddings. Every
source row retrieves one target row and the error rate is the share of wrong retrievals
(and the same from the target side). Rows are L2-normalised, so inner products are cosines.
The retrieved row is chosen among the k nearest targets of x, NN_k(x), by one of three scores:

- ``absolute``: cos(x, y) -- plain nearest neighbour;
- ``ratio`` (LASER's default): cos(x, y) / m(x, y);
- ``distance``: cos(x, y) - m(x, y);

with m(x, y) = (mean of cos(x, z) over z in NN_k(x) + mean of cos(y, z) over z in NN_k(y)) / 2,
NN_k(y) being y's k nearest *source* rows (Artetxe & Schwenk, 2019, margin-based scoring).
A retrieval is wrong when it is not the aligned row (index error), or, given the text of the
retrieved side, when its text differs from the aligned row's text (textual error: a test set
with duplicate sentences has several right answers).

The steps are those of LASER's ``source/xsim.py``, so that with faiss the retrievals, and the
error counts, are LASER's: rows normalised by faiss's ``normalize_L2``, neighbours from faiss's
``IndexFlatIP`` (a search for the single nearest row for ``absolute``, for the k nearest for the
margins), the margin computed in LASER's precision, and the first best candidate in faiss's
order retrieved (numpy's argmax). Without faiss an exact numpy search stands in for it, keeping
and ordering equal similarities as faiss does; its cosines may differ from faiss's in the last
float32 bit, so a near-tie can go the other way.
"""
import logging
from dataclasses import dataclass, field
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from fairseq_ctx.embedding.embedding_file import EmbeddingFileError, check_embeddings, read_embeddings

MARGINS = ("absolute", "ratio", "distance")
DIRECTIONS = ("src2tgt", "tgt2src")
SEARCHES = ("auto", "faiss", "exact")
BLOCK_ELEMENTS = 1 << 22
MARGIN_TYPE = type(np.float32(1) / 2)
"""The type numpy gives LASER's margin arithmetic on float32 scalars, ``a / ((A_x + A_y) / 2)``:
float32 under numpy >= 2 (NEP 50), float64 before."""


class Neighbours(NamedTuple):
    """The k nearest keys of every query: cosines (n, k) float32, best first, and key rows (n, k)."""

    similarities: np.ndarray
    indices: np.ndarray


@dataclass(frozen=True)
class RetrievalError:
    """Wrong retrievals out of ``total`` queries; ``error_type`` is ``index`` or ``text``;
    ``wrong``: (query row, retrieved row) of every wrong retrieval, 0-based."""

    errors: int
    total: int
    error_type: str
    wrong: Tuple[Tuple[int, int], ...] = field(default=(), compare=False, repr=False)

    @property
    def percent(self) -> float:
        return 100.0 * self.errors / self.total

    def as_dict(self) -> Dict:
        return {"errors": self.errors, "total": self.total, "error_percent": self.percent,
                "error_type": self.error_type}


def _import_faiss():
    """The faiss module, or None; its loader's INFO lines about CPU variants are kept quiet."""
    logging.getLogger("faiss.loader").setLevel(logging.WARNING)
    try:
        import faiss
    except ImportError:
        return None
    return faiss


def faiss_available() -> bool:
    return _import_faiss() is not None


def resolve_search(search: str) -> str:
    """``faiss`` or ``exact``: what ``search`` (``auto``, ``faiss``, ``exact``) runs here."""
    if search not in SEARCHES:
        raise ValueError(f"search must be one of {', '.join(SEARCHES)}, got '{search}'")
    if search == "auto":
        return "faiss" if faiss_available() else "exact"
    return search


def normalise(embeddings: np.ndarray, search: str = "exact") -> np.ndarray:
    """A float32 copy with every row scaled to unit L2 norm: by faiss's ``normalize_L2`` (as
    LASER normalises) when ``search`` resolves to faiss, else by numpy."""
    rows = np.array(embeddings, dtype=np.float32)
    if resolve_search(search) == "faiss":
        _import_faiss().normalize_L2(rows)
    else:
        rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    return rows


def nearest_neighbours(queries: np.ndarray, keys: np.ndarray, k: int, search: str = "auto") -> Neighbours:
    """The k keys of highest inner product with every query, best first.

    Ties are resolved as faiss's ``IndexFlatIP`` resolves them: among keys of equal similarity
    the lower rows are kept, and they are listed higher row first.
    """
    if resolve_search(search) == "faiss":
        return _faiss_search(queries, keys, k)
    return _exact_search(queries, keys, k)


def _faiss_search(queries: np.ndarray, keys: np.ndarray, k: int) -> Neighbours:
    faiss = _import_faiss()
    if faiss is None:
        raise ImportError("faiss search needs faiss: pip install faiss-cpu (the 'faiss' extra: "
                          "pip install -e '.[faiss]'), or use the exact search")
    index = faiss.IndexFlatIP(keys.shape[1])
    index.add(np.ascontiguousarray(keys, dtype=np.float32))
    similarities, indices = index.search(np.ascontiguousarray(queries, dtype=np.float32), k)
    return Neighbours(similarities, indices.astype(np.int64))


def _exact_search(queries: np.ndarray, keys: np.ndarray, k: int) -> Neighbours:
    similarities = np.empty((len(queries), k), dtype=np.float32)
    indices = np.empty((len(queries), k), dtype=np.int64)
    step = max(1, BLOCK_ELEMENTS // len(keys))
    for start in range(0, len(queries), step):
        scores = queries[start:start + step] @ keys.T
        kth = -np.partition(-scores, k - 1, axis=1)[:, k - 1:k]
        above, tied = scores > kth, scores == kth
        room = k - above.sum(axis=1, keepdims=True)
        chosen = above | (tied & (np.cumsum(tied, axis=1) <= room))
        columns = np.nonzero(chosen)[1].reshape(-1, k)
        values = np.take_along_axis(scores, columns, axis=1)
        order = np.lexsort((-columns, -values), axis=-1)
        similarities[start:start + step] = np.take_along_axis(values, order, axis=1)
        indices[start:start + step] = np.take_along_axis(columns, order, axis=1)
    return Neighbours(similarities, indices)


def margin_scores(forward: Neighbours, backward: Neighbours, margin: str) -> np.ndarray:
    """The score (n, k) of every query's candidates, ``forward``'s k nearest keys in its order.

    ``absolute``: the cosines of ``forward``. The margins: ``backward`` holds the keys' k nearest
    queries (for the second mean); the scores are computed in LASER's precision (float32 means
    and sum, then :data:`MARGIN_TYPE`).
    """
    if margin not in MARGINS:
        raise ValueError(f"margin must be one of {', '.join(MARGINS)}, got '{margin}'")
    if margin == "absolute":
        return forward.similarities
    query_mean = forward.similarities.mean(axis=1)
    key_mean = backward.similarities.mean(axis=1)
    denominator = (query_mean[:, None] + key_mean[forward.indices]).astype(MARGIN_TYPE) / 2
    similarities = forward.similarities.astype(MARGIN_TYPE)
    return similarities / denominator if margin == "ratio" else similarities - denominator


def best_candidates(forward: Neighbours, backward: Neighbours, margin: str) -> np.ndarray:
    """The retrieved key row of every query, as LASER's ``_score_knn`` retrieves it: the first
    best candidate of :func:`margin_scores` in the listed (faiss's) order. For ``absolute`` that
    is the first neighbour of ``forward`` (LASER searches the single nearest key for it)."""
    if margin == "absolute":
        return forward.indices[:, 0]
    scores = margin_scores(forward, backward, margin)
    return forward.indices[np.arange(len(scores)), scores.argmax(axis=1)]


def count_errors(retrieved: np.ndarray, texts: Optional[Sequence[str]] = None) -> RetrievalError:
    """Index error (query i must retrieve row i) or, with the texts of the retrieved side,
    textual error (row i's text must equal the retrieved row's text)."""
    pairs = list(enumerate(retrieved.tolist()))
    if texts is None:
        wrong = tuple((i, j) for i, j in pairs if i != j)
        return RetrievalError(len(wrong), len(retrieved), "index", wrong)
    wrong = tuple((i, j) for i, j in pairs if texts[i] != texts[j])
    return RetrievalError(len(wrong), len(retrieved), "text", wrong)


XsimResult = Dict[str, Dict[str, RetrievalError]]


def xsim(src: np.ndarray, tgt: np.ndarray, margins: Sequence[str] = MARGINS, k: int = 4,
         src_texts: Optional[Sequence[str]] = None, tgt_texts: Optional[Sequence[str]] = None,
         search: str = "auto", src_name: str = "source", tgt_name: str = "target") -> XsimResult:
    """{margin: {"src2tgt": error, "tgt2src": error}} for two aligned embedding matrices.

    src→tgt uses ``tgt_texts`` (the retrieved side) for the textual error, tgt→src ``src_texts``;
    without them the error is by index. ``src_name`` / ``tgt_name`` name the inputs in errors.
    """
    for margin in margins:
        if margin not in MARGINS:
            raise ValueError(f"margin must be one of {', '.join(MARGINS)}, got '{margin}'")
    check_embeddings(src, src_name)
    check_embeddings(tgt, tgt_name)
    if src.shape != tgt.shape:
        raise EmbeddingFileError(f"{src_name} has {src.shape[0]} rows of dimension {src.shape[1]} but {tgt_name} has "
                                 f"{tgt.shape[0]} rows of dimension {tgt.shape[1]}; xsim needs aligned files: row i of "
                                 f"one is the translation of row i of the other, embedded by the same model")
    rows = len(src)
    for texts, name, side in ((src_texts, src_name, "source"), (tgt_texts, tgt_name, "target")):
        if texts is not None and len(texts) != rows:
            raise EmbeddingFileError(f"the {side} text has {len(texts)} lines but {name} has {rows} rows; give the "
                                     f"text that was embedded, one line per row")
    if any(margin != "absolute" for margin in margins) and not 1 <= k < rows:
        raise EmbeddingFileError(f"--k {k} nearest neighbours needs 1 <= k < rows, but {src_name} and {tgt_name} "
                                 f"have {rows} rows; lower --k or use more sentences")
    x, y = normalise(src, search), normalise(tgt, search)
    searches = {}  # neighbours per k: 1 for absolute, k for the margins, as LASER searches them
    for size in sorted({1 if margin == "absolute" else k for margin in margins}):
        searches[size] = nearest_neighbours(x, y, size, search), nearest_neighbours(y, x, size, search)
    result = {}
    for margin in margins:
        x2y, y2x = searches[1 if margin == "absolute" else k]
        result[margin] = {"src2tgt": count_errors(best_candidates(x2y, y2x, margin), tgt_texts),
                          "tgt2src": count_errors(best_candidates(y2x, x2y, margin), src_texts)}
    return result


def read_aligned_text(path: str, embeddings_name: str, rows: int) -> List[str]:
    """The lines of the text embedded as ``embeddings_name``, without line endings (the textual
    error compares them); one line per embedding row."""
    with open(path, encoding="utf-8", errors="surrogateescape") as handle:
        lines = [line.rstrip("\r\n") for line in handle]
    if len(lines) != rows:
        raise EmbeddingFileError(f"text file {path} has {len(lines)} lines but embedding file {embeddings_name} has "
                                 f"{rows} rows; give the text that was embedded, one line per row")
    return lines


def xsim_files(src_path: str, tgt_path: str, margins: Sequence[str] = MARGINS, k: int = 4,
               src_text: Optional[str] = None, tgt_text: Optional[str] = None, search: str = "auto",
               dim: Optional[int] = None, fp16: bool = False) -> XsimResult:
    """:func:`xsim` of two embedding files (see :func:`read_embeddings`), with the textual
    error for a direction when the text file of its retrieved side is given."""
    src = read_embeddings(src_path, dim, fp16)
    tgt = read_embeddings(tgt_path, dim, fp16)
    src_texts = read_aligned_text(src_text, src_path, len(src)) if src_text else None
    tgt_texts = read_aligned_text(tgt_text, tgt_path, len(tgt)) if tgt_text else None
    return xsim(src, tgt, margins, k, src_texts, tgt_texts, search, src_path, tgt_path)
