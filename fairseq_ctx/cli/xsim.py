"""``fairseq-ctx-xsim``: bitext retrieval error between two aligned embedding files.

Row i of the source file should retrieve row i of the target file. Scores: cosine, or
LASER's ratio margin cos(x, y) / (mean cos of x's k nearest targets / 2 + mean cos of y's k
nearest sources / 2). Error = share of rows whose best-scoring candidate is not the aligned
one; both directions are reported. Computed in blocks, so memory is O(block · n).
"""
import argparse
import json

import numpy as np

from fairseq_ctx.cli.tool_args import refuse_overwriting

BLOCK = 2048


def _normalise(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float32)
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


def knn_mean_similarity(queries: np.ndarray, keys: np.ndarray, k: int) -> np.ndarray:
    """Mean cosine of each (normalised) query row to its k nearest key rows."""
    k = min(k, len(keys))
    out = np.empty(len(queries), dtype=np.float32)
    for start in range(0, len(queries), BLOCK):
        sims = queries[start:start + BLOCK] @ keys.T
        out[start:start + BLOCK] = np.partition(sims, -k, axis=1)[:, -k:].mean(axis=1)
    return out


def retrieval_error(src: np.ndarray, tgt: np.ndarray, margin: bool = False, k: int = 4) -> float:
    """Share of source rows whose nearest target (cosine or margin score) is not the aligned row."""
    if src.shape != tgt.shape:
        raise ValueError(f"xsim: the two embedding files must be aligned, got shapes {src.shape} and {tgt.shape}")
    src, tgt = _normalise(src), _normalise(tgt)
    if margin:
        src_knn, tgt_knn = knn_mean_similarity(src, tgt, k), knn_mean_similarity(tgt, src, k)
    wrong = 0
    for start in range(0, len(src), BLOCK):
        scores = src[start:start + BLOCK] @ tgt.T
        if margin:
            scores = scores / (src_knn[start:start + BLOCK, None] / 2 + tgt_knn[None, :] / 2)
        wrong += int((scores.argmax(axis=1) != np.arange(start, start + len(scores))).sum())
    return wrong / len(src)


def xsim(src: np.ndarray, tgt: np.ndarray, k: int = 4) -> dict:
    return {
        "cosine_src2tgt": retrieval_error(src, tgt),
        "cosine_tgt2src": retrieval_error(tgt, src),
        "margin_src2tgt": retrieval_error(src, tgt, margin=True, k=k),
        "margin_tgt2src": retrieval_error(tgt, src, margin=True, k=k),
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("src", help=".npy embeddings, row i aligned with row i of tgt")
    parser.add_argument("tgt", help=".npy embeddings")
    parser.add_argument("--k", type=int, default=4, help="neighbours for the margin score (LASER: 4)")
    parser.add_argument("--json", help="also write the errors here")
    args = parser.parse_args(argv)
    refuse_overwriting(parser, {"--json": args.json}, {"src": args.src, "tgt": args.tgt})
    src, tgt = np.load(args.src, mmap_mode="r"), np.load(args.tgt, mmap_mode="r")
    try:
        result = xsim(np.asarray(src), np.asarray(tgt), args.k)
    except ValueError as err:
        parser.exit(2, f"fairseq-ctx-xsim: error: {err}\n")
    for key, value in result.items():
        print(f"{key}\t{100 * value:.2f}%")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(result, handle, indent=2)


if __name__ == "__main__":
    main()
