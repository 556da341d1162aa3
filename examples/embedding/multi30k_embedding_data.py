"""Data of the Multi30k embedding recipe: the Multi30k task 1 files (Elliott et al., 2016) checked
and prepared (one joint sentencepiece BPE model, one shared dictionary, fairseq-preprocess per
training pair), and extra parallel test sets given on the command line."""
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

from devtools.recipe_tools import read_json, write_json

URL = "https://github.com/multi30k/dataset"
LANGS = ("en", "de", "fr", "cs")
PIVOTS = ("en", "de")
TRAIN_PAIRS = ("fr-en", "fr-de", "cs-en", "cs-de", "en-de", "de-en")
SPLITS = {"train": "train", "valid": "val", "test": "test_2016_flickr"}  # fairseq split -> Multi30k file name
# Evaluation pairs: the pair never seen in training first, then the others.
EVAL_PAIRS = (("fr", "cs"), ("en", "de"), ("fr", "en"), ("fr", "de"), ("cs", "en"), ("cs", "de"))
# File-name language codes of extra test sets: the recipe's own and ISO 639-3 (Tatoeba's tatoeba.fra-eng.fra).
LANGUAGE_CODES = {**{lang: lang for lang in LANGS}, "eng": "en", "deu": "de", "fra": "fr", "ces": "cs"}


class RecipeError(ValueError):
    """Bad input or a work directory prepared with other settings."""


def data_file(data: str, split: str, lang: str) -> str:
    return os.path.join(data, f"{SPLITS[split]}.lc.norm.tok.{lang}")


def count_lines(path: str) -> int:
    with open(path, encoding="utf-8") as handle:
        return sum(1 for _ in handle)


def check_data(data: str, k: int) -> Dict[str, int]:
    """Every file present, the four languages of a split aligned line by line; lines per split."""
    missing = [data_file(data, s, l) for s in SPLITS for l in LANGS if not os.path.isfile(data_file(data, s, l))]
    if missing:
        names = ", ".join(os.path.basename(m) for m in missing)
        raise RecipeError(f"Multi30k files missing in --data {data}: {names}; "
                          f"give the data/task1/tok directory of {URL}")
    counts = {}
    for split in SPLITS:
        lines = {lang: count_lines(data_file(data, split, lang)) for lang in LANGS}
        if len(set(lines.values())) != 1:
            raise RecipeError(f"{SPLITS[split]} is not aligned: " + ", ".join(
                f"{os.path.basename(data_file(data, split, l))} has {n} lines" for l, n in lines.items())
                + "; the four languages of a split must have one translation per line")
        counts[split] = lines[LANGS[0]]
    if counts["test"] <= k:
        raise RecipeError(f"{data_file(data, 'test', LANGS[0])} has {counts['test']} lines; xsim with k={k} nearest "
                          f"neighbours needs more than {k}")
    return counts


def prepare(data: str, work: str, bpe_vocab: int) -> dict:
    """Joint sentencepiece BPE over the four training files, applied to every split, then the shared
    dictionary and one fairseq-preprocess per pair (docs/embedding.md). Skipped when already done."""
    settings = {"data": os.path.abspath(data), "bpe_vocab": bpe_vocab}
    state_path = os.path.join(work, "prepare.json")
    state = read_json(state_path)
    if state is not None:
        if state["settings"] != settings:
            raise RecipeError(f"{work} was prepared with {state['settings']}, not {settings}; use another --work "
                              f"or delete {work}")
        return state
    import sentencepiece

    from fairseq_ctx.core.sentencepiece_codec import SentencePieceCodec
    from fairseq_ctx.embedding.data.multilingual_binarize import binarize_multilingual

    start = time.time()
    spm_dir, text_dir = os.path.join(work, "spm"), os.path.join(work, "text")
    os.makedirs(spm_dir, exist_ok=True)
    os.makedirs(text_dir, exist_ok=True)
    print(f"== sentencepiece BPE, joint {'/'.join(LANGS)}, vocabulary {bpe_vocab}", flush=True)
    prefix = os.path.join(spm_dir, "spm")
    sentencepiece.SentencePieceTrainer.train(
        input=",".join(data_file(data, "train", lang) for lang in LANGS), model_prefix=prefix, vocab_size=bpe_vocab,
        model_type="bpe", character_coverage=1.0, hard_vocab_limit=False, num_threads=2, minloglevel=2)
    codec = SentencePieceCodec(prefix + ".model")  # the encoding fairseq-ctx-embed --spm applies
    for split in SPLITS:
        for lang in LANGS:
            with open(data_file(data, split, lang), encoding="utf-8") as src, \
                    open(os.path.join(text_dir, f"{split}.{lang}"), "w", encoding="utf-8") as dst:
                dst.writelines(codec.encode(line) + "\n" for line in src)
    print(f"== shared dictionary, fairseq-preprocess for {' '.join(TRAIN_PAIRS)}", flush=True)
    binarize_multilingual(Path(text_dir), Path(work) / "data-bin", TRAIN_PAIRS, LANGS)
    state = {"settings": settings, "spm": prefix + ".model", "data_bin": os.path.join(work, "data-bin"),
             "wall_time_s": time.time() - start}
    write_json(state_path, state)
    return state




@dataclass(frozen=True)
class ExtraTest:
    """An extra parallel test set: two line-aligned text files (line i of one translates line i of
    the other) in two of the recipe's languages, named after the first file."""

    name: str
    langs: Tuple[str, str]
    paths: Tuple[str, str]


def file_language(item: str) -> Tuple[str, str]:
    """(language, path) of ``LANG=PATH``, or of a path whose last suffix is a language code."""
    lang, sep, path = item.partition("=")
    if sep and lang in LANGUAGE_CODES:
        return LANGUAGE_CODES[lang], path
    suffix = os.path.splitext(item)[1].lstrip(".")
    if suffix not in LANGUAGE_CODES:
        raise RecipeError(f"--extra-test {item}: cannot tell its language from the suffix .{suffix}; name it "
                          f"LANG=PATH with LANG one of {', '.join(LANGUAGE_CODES)}")
    return LANGUAGE_CODES[suffix], item


def check_extra_test(items: Sequence[str], k: int) -> ExtraTest:
    """The set of ``--extra-test A B``: both files present, in two different recipe languages, with
    the same number of lines, none empty, and more than ``k`` of them (xsim's neighbours)."""
    (lang_a, path_a), (lang_b, path_b) = (file_language(item) for item in items)
    if lang_a == lang_b:
        raise RecipeError(f"--extra-test {' '.join(items)}: both files are {lang_a}; give two languages")
    lines: Dict[str, List[str]] = {}
    for path in (path_a, path_b):
        if not os.path.isfile(path):
            raise RecipeError(f"--extra-test: {path} does not exist")
        with open(path, encoding="utf-8") as handle:
            lines[path] = handle.read().splitlines()
        empty = next((number for number, line in enumerate(lines[path], 1) if not line.strip()), None)
        if empty is not None:
            raise RecipeError(f"--extra-test: {path}:{empty} is empty; every line must hold the sentence aligned "
                              f"with the same line of the other file")
    if len(lines[path_a]) != len(lines[path_b]):
        raise RecipeError(f"--extra-test: {path_a} has {len(lines[path_a])} lines but {path_b} has "
                          f"{len(lines[path_b])}; the two files must be line-aligned translations")
    if len(lines[path_a]) <= k:
        raise RecipeError(f"--extra-test: {path_a} has {len(lines[path_a])} lines; xsim with k={k} nearest neighbours "
                          f"needs more than {k}")
    name = os.path.splitext(os.path.basename(path_a))[0]
    return ExtraTest(name, (lang_a, lang_b), (os.path.abspath(path_a), os.path.abspath(path_b)))
