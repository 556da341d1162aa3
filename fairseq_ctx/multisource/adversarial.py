"""Adversarial evaluation of a multi-source model (Elliott 2018's "adversarial evaluation", as used
by Libovický 2019 ch. 5): how much does the model rely on each auxiliary input?

A split is decoded with stock ``fairseq-generate`` once unchanged and once per auxiliary input
with that input replaced by a random permutation of itself across the split: a feature input
through a permuted ``{split}.{name}.ids`` row map (the features are not copied), an extra source
language through a permuted binarized copy. Scores: BLEU and, with an answer key, the accuracy
on the ambiguous words.
"""
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import numpy as np
import sacrebleu

from fairseq_ctx.core.scoring import context_accuracy, read_answer_key, whole_split
from fairseq_ctx.multisource.data.feature_file import feature_path, ids_path, open_features


@dataclass
class DecodeOptions:
    """What ``fairseq-generate`` needs besides the data directory."""
    checkpoint: str
    user_dir: str
    gen_subset: str = "test"
    feature_inputs: str = ""
    extra_source_langs: str = ""
    extra_source_dict: str = "shared"
    source_lang: Optional[str] = None
    target_lang: Optional[str] = None
    beam: int = 5
    batch_size: int = 64
    cpu: bool = False
    extra: List[str] = field(default_factory=list)


def link_data_dir(data: str, target: str, skip: List[str]) -> None:
    for name in os.listdir(data):
        if name not in skip:
            os.symlink(os.path.abspath(os.path.join(data, name)), os.path.join(target, name))


def shuffle_feature(data: str, target: str, split: str, name: str, rng: np.random.Generator) -> List[str]:
    """Write a permuted ``{split}.{name}.ids`` into ``target``; returns the file names it replaces."""
    original = ids_path(data, split, name)
    if os.path.exists(original):
        rows = np.loadtxt(original, dtype=np.int64, ndmin=1)
    else:
        rows = np.arange(len(open_features(feature_path(data, split, name))))
    np.savetxt(ids_path(target, split, name), rng.permutation(rows), fmt="%d")
    return [os.path.basename(original)]


def extra_source_stem(data: str, split: str, lang: str, tgt: Optional[str]) -> str:
    """``{split}.{lang}-{tgt}.{lang}``; without ``tgt`` the only such pair in the directory."""
    if tgt:
        return f"{split}.{lang}-{tgt}.{lang}"
    found = sorted(name[:-len(".idx")] for name in os.listdir(data)
                   if name.startswith(f"{split}.{lang}-") and name.endswith(f".{lang}.idx"))
    if len(found) != 1:
        raise ValueError(f"found {found or 'no'} binarized '{lang}' files for split '{split}' in {data}; "
                         f"pass -t/--target-lang")
    return found[0]


def shuffle_text(data: str, target: str, split: str, lang: str, tgt: Optional[str], rng: np.random.Generator) -> List[str]:
    """Write a sentence-permuted binarized copy of the ``lang`` source into ``target``; returns the
    file names it replaces."""
    from fairseq.data import indexed_dataset

    stem = extra_source_stem(data, split, lang, tgt)
    dataset = indexed_dataset.MMapIndexedDataset(os.path.join(data, stem))
    builder = indexed_dataset.MMapIndexedDatasetBuilder(os.path.join(target, stem + ".bin"), dtype=dataset._index.dtype)
    for index in rng.permutation(len(dataset)):
        builder.add_item(dataset[int(index)])
    builder.finalize(os.path.join(target, stem + ".idx"))
    return [stem + ".bin", stem + ".idx"]


def decode(data: str, options: DecodeOptions, key: Optional[str] = None) -> Dict[str, float]:
    """BLEU (and the ambiguous-word accuracy with ``key``) of ``fairseq-generate`` on ``data``."""
    command = [str(Path(sys.executable).parent / "fairseq-generate"), data, "--user-dir", options.user_dir,
               "--task", "multimodal_translation", "--path", options.checkpoint, "--gen-subset", options.gen_subset,
               "--beam", str(options.beam), "--batch-size", str(options.batch_size), "--required-batch-size-multiple",
               "1", "--feature-inputs", options.feature_inputs, "--extra-source-langs", options.extra_source_langs,
               "--extra-source-dict", options.extra_source_dict, *(["--cpu"] if options.cpu else []), *options.extra]
    for flag, value in (("--source-lang", options.source_lang), ("--target-lang", options.target_lang)):
        if value:
            command += [flag, value]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"fairseq-generate failed:\n{result.stderr[-3000:]}")
    with tempfile.TemporaryDirectory() as tmp:
        output = os.path.join(tmp, "generate.out")
        with open(output, "w", encoding="utf-8") as handle:
            handle.write(result.stdout)
        hyps, ids, references = whole_split(output)
    scores = {"bleu": sacrebleu.corpus_bleu([hyps[i] for i in ids], [references]).score}
    if key:
        scores["accuracy"] = context_accuracy(hyps, read_answer_key(key, len(ids), "fairseq-generate's output"))[0]
    return scores


def adversarial_evaluation(data: str, options: DecodeOptions, shuffle: Sequence[str], key: Optional[str] = None,
                           seed: int = 1) -> Dict[str, Dict[str, float]]:
    """``{"original": scores, "shuffled NAME": scores, ...}`` for every input in ``shuffle`` (a
    feature input or an extra source language)."""
    features = [n for n in options.feature_inputs.split(",") if n]
    langs = [n for n in options.extra_source_langs.split(",") if n]
    for name in shuffle:
        if name not in features and name not in langs:
            raise ValueError(f"'{name}' is not in --feature-inputs or --extra-source-langs")
    rng = np.random.default_rng(seed)
    results = {"original": decode(data, options, key)}
    for name in shuffle:
        with tempfile.TemporaryDirectory() as tmp:
            if name in features:
                skip = shuffle_feature(data, tmp, options.gen_subset, name, rng)
            else:
                skip = shuffle_text(data, tmp, options.gen_subset, name, options.target_lang, rng)
            link_data_dir(data, tmp, skip)
            results[f"shuffled {name}"] = decode(tmp, options, key)
    return results
