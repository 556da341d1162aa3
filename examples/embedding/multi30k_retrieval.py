"""Retrieval evaluation of the Multi30k embedding recipe: every line of a set embedded with
fairseq-ctx-embed's ``Embedder`` (with the recipe's sentencepiece model), then xsim as LASER
computes it (``fairseq_ctx.embedding.xsim``: ratio margin, k nearest neighbours, textual error:
a duplicate sentence counts as right) for both directions of every pair; one row per direction,
with the (query, retrieved) rows of every wrong retrieval."""
import os
import statistics
from typing import Dict, List, Sequence, Tuple

from examples.embedding.multi30k_embedding_data import EVAL_PAIRS, LANGS, TRAIN_PAIRS, data_file


def retrieval_rows(checkpoint: str, spm: str, texts: Dict[str, str], pairs: Sequence[Tuple[str, str]], out_dir: str,
                   k: int, device: str) -> List[dict]:
    """Embed ``texts`` ({language: text file}, line-aligned) into ``out_dir/LANG.npy`` on ``device``
    (``cpu`` or ``cuda``) and score every pair."""
    from fairseq_ctx.embedding.embedder import Embedder, embed_file
    from fairseq_ctx.embedding.xsim import xsim_files

    os.makedirs(out_dir, exist_ok=True)
    for lang, path in texts.items():
        embed_file(Embedder(checkpoint, lang, spm=spm, cpu=device == "cpu"), path, os.path.join(out_dir, f"{lang}.npy"),
                   max_tokens=6000, chunk_lines=5000)
    rows = []
    for src, tgt in pairs:
        result = xsim_files(os.path.join(out_dir, f"{src}.npy"), os.path.join(out_dir, f"{tgt}.npy"), ("ratio",), k,
                            texts[src], texts[tgt])["ratio"]
        for direction, (a, b) in (("src2tgt", (src, tgt)), ("tgt2src", (tgt, src))):
            error = result[direction]
            rows.append({"src": a, "tgt": b, "error_percent": error.percent, "errors": error.errors,
                         "total": error.total, "error_type": error.error_type,
                         "seen_in_training": f"{a}-{b}" in TRAIN_PAIRS or f"{b}-{a}" in TRAIN_PAIRS,
                         "wrong": [list(pair) for pair in error.wrong]})
    return rows


def multi30k_rows(checkpoint: str, spm: str, data: str, split: str, out_dir: str, k: int, device: str) -> List[dict]:
    """The six language pairs of a Multi30k split (the pair never seen in training first)."""
    return retrieval_rows(checkpoint, spm, {lang: data_file(data, split, lang) for lang in LANGS}, EVAL_PAIRS,
                          out_dir, k, device)


def mean_error(rows: Sequence[dict]) -> float:
    return statistics.fmean(row["error_percent"] for row in rows)
