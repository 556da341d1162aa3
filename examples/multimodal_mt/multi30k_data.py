"""Multi30k task 1 for the recipes (Elliott et al., 2016): checks of the tokenised files, one joint
sentencepiece BPE model, and one ``data-bin`` holding en–de and each second source language,
binarized split by split with one shared dictionary.

Data: ``{stem}.lc.norm.tok.{lang}`` (lowercased, normalised, Moses-tokenised), stems ``train``,
``val`` and the test sets (``test_2016_flickr``, ``test_2017_flickr``, ``test_2017_mscoco``, …).
A split needs only the languages the run reads (en, de and the second sources); the training
split also needs every language of ``--spm-langs``, the text the sentencepiece model and the
dictionary are learnt from. test_2016_flickr is binarized as fairseq's ``test`` split, every
other test set under its own stem.

Every file is written whole or not at all (under another name, then renamed) and every stage
whose files exist is skipped, so a test set added later is binarized alone and an interrupted
preparation resumes where it stopped.
"""
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Dict, List, Sequence

from devtools.recipe_tools import Step, run, write_whole

SOURCE, TARGET = "en", "de"
TRAIN, VALID = "train", "val"
DEFAULT_TEST = "test_2016_flickr"
SPM_LANGS = "en,de,fr,cs"
DATASET = "data/task1/tok of https://github.com/multi30k/dataset"
TEST_SET_NAME = re.compile(r"[A-Za-z0-9_]+")


def split_name(stem: str) -> str:
    """fairseq's split name for a Multi30k file stem (``val`` → ``valid``, test_2016_flickr → ``test``)."""
    return {TRAIN: "train", VALID: "valid", DEFAULT_TEST: "test"}.get(stem, stem)


def data_file(data: str, stem: str, lang: str) -> str:
    return os.path.join(data, f"{stem}.lc.norm.tok.{lang}")


def unique(items: Sequence[str]) -> List[str]:
    return list(dict.fromkeys(items))


def parse_test_sets(value: str, program: str) -> List[str]:
    """The file stems of ``--test-sets``: comma-separated, each a plain name, no duplicates."""
    stems = [stem for stem in value.split(",") if stem]
    bad = [stem for stem in stems if not TEST_SET_NAME.fullmatch(stem) or stem in (TRAIN, VALID)]
    if not stems or bad or len(set(stems)) != len(stems):
        sys.exit(f"{program}: error: --test-sets {value!r}: give distinct file stems such as "
                 f"{DEFAULT_TEST},test_2017_flickr (letters, digits and '_'; not {TRAIN} or {VALID})")
    return stems


def check_data(data: str, test_sets: Sequence[str], langs: Sequence[str], spm_langs: Sequence[str],
               program: str) -> Dict[str, int]:
    """Every file a run reads is present and each split's files line-aligned; returns lines per
    file stem. ``langs``: the languages every split needs; the training split also needs
    ``spm_langs``."""
    missing_spm = [lang for lang in langs if lang not in spm_langs]
    if missing_spm:
        sys.exit(f"{program}: error: --spm-langs {','.join(spm_langs)} leaves out {','.join(missing_spm)}, which the "
                 f"run reads; add it to --spm-langs")
    needs = {TRAIN: unique([*spm_langs, *langs]), VALID: list(langs), **{stem: list(langs) for stem in test_sets}}
    counts: Dict[str, int] = {}
    for stem, stem_langs in needs.items():
        lines = {}
        for lang in stem_langs:
            path = data_file(data, stem, lang)
            if not os.path.isfile(path):
                if stem in test_sets and stem != DEFAULT_TEST:
                    fix = f"add the test set's files or leave {stem} out of --test-sets"
                elif stem == TRAIN and lang not in langs:
                    fix = (f"the sentencepiece model is learnt over --spm-langs {','.join(spm_langs)}; give "
                           f"--spm-langs without {lang} to leave it out (this changes the vocabulary)")
                else:
                    fix = f"pass the directory holding Multi30k task 1's tokenised files ({DATASET})"
                sys.exit(f"{program}: error: {path} not found; {fix}")
            with open(path, encoding="utf-8") as handle:
                lines[path] = sum(1 for _ in handle)
        if len(set(lines.values())) != 1:
            sys.exit(f"{program}: error: the {stem} files are not line-aligned: "
                     + ", ".join(f"{p} has {n} lines" for p, n in lines.items())
                     + "; use the files of one Multi30k release")
        counts[stem] = next(iter(lines.values()))
    return counts


def train_sentencepiece(data: str, work: Path, spm_langs: Sequence[str], vocab: int) -> Path:
    """Joint BPE over the training text of ``spm_langs`` (identity normalisation, one thread:
    deterministic), ``{work}/spm/spm.model``; returns the ``spm`` directory."""
    import sentencepiece as spm

    out = work / "spm"
    if (out / "spm.model").exists():
        return out
    out.mkdir(parents=True, exist_ok=True)
    spm.SentencePieceTrainer.train(
        input=",".join(data_file(data, TRAIN, lang) for lang in spm_langs),
        model_prefix=str(out / "partial"), vocab_size=vocab, model_type="bpe", character_coverage=1.0,
        normalization_rule_name="identity", hard_vocab_limit=False, num_threads=1, minloglevel=2)
    os.replace(out / "partial.vocab", out / "spm.vocab")
    os.replace(out / "partial.model", out / "spm.model")
    return out


def encode(data: str, spm_dir: Path, stem: str, langs: Sequence[str]) -> None:
    """``spm/{split}.{lang}``: the file's lines as sentencepiece pieces, for each language not yet done."""
    import sentencepiece as spm

    processor = None
    for lang in langs:
        out = spm_dir / f"{split_name(stem)}.{lang}"
        if out.exists():
            continue
        processor = processor or spm.SentencePieceProcessor(model_file=str(spm_dir / "spm.model"))
        with open(data_file(data, stem, lang), encoding="utf-8") as handle:
            lines = handle.read().splitlines()
        write_whole(out, "".join(" ".join(pieces) + "\n" for pieces in processor.encode(lines, out_type=str)))


def _prefix_option(split: str) -> str:
    return {"train": "--trainpref", "valid": "--validpref"}.get(split, "--testpref")


def _binarized_name(split: str) -> str:
    """The split name fairseq-preprocess gives the output of ``_prefix_option(split)``."""
    return split if split in ("train", "valid") else "test"


def binarize_steps(spm_dir: Path, work: Path, split: str, extra_langs: Sequence[str], workers: int) -> List[Step]:
    """fairseq-preprocess of one split into ``{work}/bin-partial``: en–de, then each extra source
    (``--only-source``), all with the one dictionary ``dict/dict.all.txt``."""
    dictionary, partial = str(work / "dict" / "dict.all.txt"), str(work / "bin-partial")
    prefix = [_prefix_option(split), str(spm_dir / split)]
    steps = [Step("fairseq-preprocess", ["--source-lang", SOURCE, "--target-lang", TARGET, *prefix,
                                         "--srcdict", dictionary, "--tgtdict", dictionary, "--destdir", partial,
                                         "--workers", str(workers)])]
    steps += [Step("fairseq-preprocess", ["--only-source", "--source-lang", lang, "--target-lang", TARGET, *prefix,
                                          "--srcdict", dictionary, "--destdir", partial, "--workers", str(workers)])
              for lang in extra_langs]
    return steps


def binarized_files(split: str, lang: str) -> List[str]:
    """The data-bin files of one split and language (en and de: the en–de pair; others: ``{lang}-de``)."""
    pair = f"{SOURCE}-{TARGET}" if lang in (SOURCE, TARGET) else f"{lang}-{TARGET}"
    return [f"{split}.{pair}.{lang}.{ext}" for ext in ("bin", "idx")]


def dictionary_step(spm_dir: Path, work: Path, workers: int) -> Step:
    return Step("fairseq-preprocess", ["--only-source", "--source-lang", "all", "--trainpref", str(spm_dir / "train"),
                                       "--destdir", str(work / "dict"), "--dict-only", "--workers", str(workers)])


def prepare(data: str, work: Path, test_sets: Sequence[str], extra_langs: Sequence[str], spm_langs: Sequence[str],
            vocab: int, workers: int) -> List[Step]:
    """Sentencepiece, dictionary and ``data-bin`` for train, val and ``test_sets`` with en, de and
    ``extra_langs``, each stage skipped when its files exist; returns every data command (run now
    or before) for the record."""
    data_bin = work / "data-bin"
    spm_dir = train_sentencepiece(data, work, spm_langs, vocab)
    langs = [SOURCE, TARGET, *extra_langs]
    encode(data, spm_dir, TRAIN, unique([*spm_langs, *langs]))
    for stem in (VALID, *test_sets):
        encode(data, spm_dir, stem, langs)
    steps = [dictionary_step(spm_dir, work, workers)]
    if not (work / "dict" / "dict.all.txt").exists():
        write_whole(spm_dir / "train.all", "".join((spm_dir / f"train.{lang}").read_text(encoding="utf-8")
                                                    for lang in spm_langs))
        run(steps[0])
    data_bin.mkdir(exist_ok=True)
    for stem in (TRAIN, VALID, *test_sets):
        split = split_name(stem)
        split_steps = binarize_steps(spm_dir, work, split, extra_langs, workers)
        steps += split_steps
        if all((data_bin / name).exists() for lang in langs for name in binarized_files(split, lang)):
            continue
        shutil.rmtree(work / "bin-partial", ignore_errors=True)
        for step in split_steps:
            run(step)
        for lang in langs:
            for name in binarized_files(split, lang):
                written = name.replace(f"{split}.", f"{_binarized_name(split)}.", 1)
                os.replace(work / "bin-partial" / written, data_bin / name)
        for lang in (SOURCE, TARGET):
            if not (data_bin / f"dict.{lang}.txt").exists():
                shutil.copyfile(work / "bin-partial" / f"dict.{lang}.txt", data_bin / f"dict.{lang}.txt")
        shutil.rmtree(work / "bin-partial")
    return steps
